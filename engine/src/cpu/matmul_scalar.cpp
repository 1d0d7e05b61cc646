// The portable kernel family: one dot product per (row, token). Quantised
// weights use quant's vec_dot_ref against activations in ggml's own formats
// (Q8_0, Q8_1, Q8_K): ggml's arithmetic (exact integer block sums, scaled in
// f32 per block), so this family reproduces llama.cpp's CPU results and is the
// yardstick the SIMD families are tested against. Float weights keep f32
// activations (no rounding of x to f16/bf16), summed in 8 f32 lanes.
#include <cstring>
#include <vector>

#include "common/fp16.h"
#include "cpu/matmul.h"
#include "cpu/matmul_kernels.h"
#include "quant/quant.h"

namespace fish::mm {

namespace {

// ---- float weights · f32 activations (8 partial sums, like a SIMD lane set) ----

template <class Load>
float dot_float(const void* w, const float* x, int64_t n, Load load) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += load(w, i + l) * x[i + l];
  for (; i < n; ++i) acc[0] += load(w, i) * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

float dot_f32(const uint8_t* w, const uint8_t* a, int64_t n) {
  return dot_float(w, reinterpret_cast<const float*>(a), n, [](const void* p, int64_t i) {
    float v;
    std::memcpy(&v, static_cast<const uint8_t*>(p) + 4 * i, 4);
    return v;
  });
}
float dot_f16(const uint8_t* w, const uint8_t* a, int64_t n) {
  return dot_float(w, reinterpret_cast<const float*>(a), n, [](const void* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, static_cast<const uint8_t*>(p) + 2 * i, 2);
    return fp16_to_fp32(h);
  });
}
float dot_bf16(const uint8_t* w, const uint8_t* a, int64_t n) {
  return dot_float(w, reinterpret_cast<const float*>(a), n, [](const void* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, static_cast<const uint8_t*>(p) + 2 * i, 2);
    return bf16_to_fp32(h);
  });
}

// ---- the kernel wrappers: one dot per (row, token) ----

using DotFn = float (*)(const uint8_t*, const uint8_t*, int64_t);

template <DotFn kDot>
void kernel(const KernelArgs& k) {
  for (int64_t r = k.r0; r < k.r1; ++r) {
    const uint8_t* w = k.w + uint64_t(r) * k.w_stride;
    for (int t = 0; t < k.n_tok; ++t) k.y[t * k.ldy + r] = kDot(w, k.act + uint64_t(t) * k.act_stride, k.n_in);
  }
}

template <GgmlType kT>
void kernel_ref(const KernelArgs& k) {
  for (int64_t r = k.r0; r < k.r1; ++r) {
    const uint8_t* w = k.w + uint64_t(r) * k.w_stride;
    for (int t = 0; t < k.n_tok; ++t) k.y[t * k.ldy + r] = vec_dot_ref(kT, k.n_in, w, k.act + uint64_t(t) * k.act_stride);
  }
}

// 16-row strips: each row is put back into its GGUF bytes first, so the
// results equal those of the original weight bit for bit (slow: a fallback
// for families without strip kernels, and the yardstick of those kernels).
template <GgmlType kT>
void kernel_strip_ref(const KernelArgs& k) {
  static thread_local std::vector<uint8_t> row;
  row.resize(k.w_stride);
  WeightView v;
  v.type = kT;
  v.data = k.w;
  v.n_in = k.n_in;
  v.n_out = k.r1;
  v.row_bytes = k.w_stride;
  v.layout = WeightLayout::Strips16;
  for (int64_t r = k.r0; r < k.r1; ++r) {
    weight_row_gguf(v, r, row.data());
    for (int t = 0; t < k.n_tok; ++t)
      k.y[t * k.ldy + r] = vec_dot_ref(kT, k.n_in, row.data(), k.act + uint64_t(t) * k.act_stride);
  }
}

KernelFamily make_family() {
  KernelFamily f{};
  f.name = "scalar";
  auto set = [&](WType t, KernelFn fn, ActLayout l) { f.entry[int(t)] = {fn, l}; };
  set(WType::F32, kernel<dot_f32>, ActLayout::F32);
  set(WType::F16, kernel<dot_f16>, ActLayout::F32);
  set(WType::BF16, kernel<dot_bf16>, ActLayout::F32);
  set(WType::Q4_0, kernel_ref<GgmlType::Q4_0>, ActLayout::Q8_0);
  set(WType::Q4_1, kernel_ref<GgmlType::Q4_1>, ActLayout::Q8_1);
  set(WType::Q5_0, kernel_ref<GgmlType::Q5_0>, ActLayout::Q8_0);
  set(WType::Q5_1, kernel_ref<GgmlType::Q5_1>, ActLayout::Q8_1);
  set(WType::Q8_0, kernel_ref<GgmlType::Q8_0>, ActLayout::Q8_0);
  set(WType::Q2_K, kernel_ref<GgmlType::Q2_K>, ActLayout::Q8_K);
  set(WType::Q3_K, kernel_ref<GgmlType::Q3_K>, ActLayout::Q8_K);
  set(WType::Q4_K, kernel_ref<GgmlType::Q4_K>, ActLayout::Q8_K);
  set(WType::Q5_K, kernel_ref<GgmlType::Q5_K>, ActLayout::Q8_K);
  set(WType::Q6_K, kernel_ref<GgmlType::Q6_K>, ActLayout::Q8_K);
  set(WType::Q4_K_S16, kernel_strip_ref<GgmlType::Q4_K>, ActLayout::Q8_K);
  set(WType::Q5_K_S16, kernel_strip_ref<GgmlType::Q5_K>, ActLayout::Q8_K);
  set(WType::Q6_K_S16, kernel_strip_ref<GgmlType::Q6_K>, ActLayout::Q8_K);
  set(WType::Q4_0_S16, kernel_strip_ref<GgmlType::Q4_0>, ActLayout::Q8_0);
  set(WType::Q4_1_S16, kernel_strip_ref<GgmlType::Q4_1>, ActLayout::Q8_1);
  set(WType::Q5_0_S16, kernel_strip_ref<GgmlType::Q5_0>, ActLayout::Q8_0);
  set(WType::Q5_1_S16, kernel_strip_ref<GgmlType::Q5_1>, ActLayout::Q8_1);
  set(WType::Q8_0_S16, kernel_strip_ref<GgmlType::Q8_0>, ActLayout::Q8_0);
  set(WType::FQ3, kernel_ref<GgmlType::FQ3>, ActLayout::Q8_K);
  f.quantize = nullptr;  // uses only ggml's layouts (quantize_act_scalar)
  return f;
}

}  // namespace

const KernelFamily* family_scalar() {
  static const KernelFamily f = make_family();
  return &f;
}

}  // namespace fish::mm
