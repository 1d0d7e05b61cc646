// Which f32 -> f16 row conversion runs (f16_row.h), and the scalar one.
#include "cpu/f16_row.h"

#include <cstring>

#include "common/fp16.h"
#include "cpu/cpu_features.h"

namespace fish {

void fp32_to_fp16_row_f16c(const float* x, uint16_t* y, int64_t n);

namespace {
void fp32_to_fp16_row_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
}  // namespace

Fp32ToFp16RowFn fp32_to_fp16_row_variant(const char* name) {
  const auto is = [&](const char* v) { return name && std::strcmp(name, v) == 0; };
  if (is("scalar")) return &fp32_to_fp16_row_scalar;
#if defined(__x86_64__)
  // The F16C file is compiled for x86-64-v3 (FishSimd.cmake): it may use
  // AVX2 too, so it needs the whole family, not F16C alone.
  if (is("f16c")) return cpu_features().x86_64_v3() ? &fp32_to_fp16_row_f16c : nullptr;
#endif
  return nullptr;
}

void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n) {
  static const Fp32ToFp16RowFn fn = [] {
    const Fp32ToFp16RowFn f = fp32_to_fp16_row_variant("f16c");
    return f ? f : &fp32_to_fp16_row_scalar;
  }();
  fn(x, y, n);
}

}  // namespace fish
