// Rows of f32 -> IEEE half bits, as the CPU layer stores K and V in the f16
// KV cache. Every variant gives, element for element, exactly the bits of
// common/fp16.h's fp32_to_fp16 (round to nearest even; overflow to inf;
// subnormal halves; a NaN becomes the quiet NaN sign | 0x7e00), so which one
// runs never changes a cached value.
#pragma once
#include <cstdint>

namespace fish {

using Fp32ToFp16RowFn = void (*)(const float* x, uint16_t* y, int64_t n);

// y[i] = fp32_to_fp16(x[i]) for i < n, by the fastest variant this CPU runs
// (F16C eight at a time, else fp16.h per element).
void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n);

// The variants by name ("scalar", "f16c"), null where this CPU (or build)
// lacks what one needs: for the tests that hold them to the scalar bits.
Fp32ToFp16RowFn fp32_to_fp16_row_variant(const char* name);

}  // namespace fish
