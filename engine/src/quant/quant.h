// Row-level conversions between f32 and every GGUF block type fish computes with.
// Block layouts are ggml's, bit for bit (see quant/blocks.h).
#pragma once
#include <cstdint>

#include "common/ggml_type.h"

namespace fish {

// dst[0..n) = the values of a row of n elements of type t (n a multiple of the
// block size). Types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K (and the activation formats Q8_1, Q8_K). Throws fish::Error
// for any other type, or for n not a whole number of blocks.
void dequant_row(GgmlType t, const void* src, float* dst, int64_t n);

// Quantises n floats (n a multiple of the block size) into a row of type t.
// Types: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, FQ3, and the activation
// formats Q8_1 and Q8_K. Throws fish::Error for any other type, for n not a
// whole number of blocks, and (weight formats Q4_0, Q4_K, Q5_K, Q6_K, FQ3) for
// an input that is not finite or too large for the format's f16 scales.
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

// The quantisers of online re-quantisation (a device copy made at load, see
// model/requant.h): FQ3 (the same as quantize_row's) and Q4_K with a shorter
// scale search than the model-file quantiser's, so that a load stays within
// its time budget (quant/affine_block.h). Same checks as quantize_row.
void requantize_row(GgmlType t, const float* src, void* dst, int64_t n);
bool can_requantize_to(GgmlType t);
bool can_quantize(GgmlType t);
bool can_dequantize(GgmlType t);

// The format a weight type's dot product wants its activations in, as in
// llama.cpp's CPU path: Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for
// the K-quants, F32 for F32, F16 for F16, BF16 for BF16.
GgmlType vec_dot_type(GgmlType weight);

// Scalar reference dot product of one weight row (type t, n elements) with one
// activation row already quantised to vec_dot_type(t). Every SIMD kernel is
// tested against this.
float vec_dot_ref(GgmlType t, int64_t n, const void* w_row, const void* act_row);

// The row kernels themselves, for loops that convert many rows of one type
// (no per-call switch or checks): n must be a multiple of the block size.
// Throw fish::Error as dequant_row / quantize_row do for an unsupported type.
using DequantRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
DequantRowFn dequant_row_fn(GgmlType t);
QuantizeRowFn quantize_row_fn(GgmlType t);
QuantizeRowFn requantize_row_fn(GgmlType t);  // requantize_row's kernels: FQ3, Q4_K

// Activation quantisation as llama.cpp's x86 CPU path does it at run time (its
// SIMD quantisers, not the reference ones): Q8_0 / Q8_1 scale by id = 127/amax
// and round ties to even; Q8_K (and every other type) as quantize_row. Matching
// it matters because outputs are compared with llama.cpp's token by token; the
// reference rounding (quantize_row) stays for weights, as llama-quantize does.
QuantizeRowFn quantize_act_row_fn(GgmlType t);

}  // namespace fish
