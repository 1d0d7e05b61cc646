// The per-type row kernels behind quant.h's dispatch. `nb` is the number of
// blocks (elements for F32/F16/BF16); no argument is checked here: quant.cpp
// validates the type and the length before it calls one of these.
#pragma once
#include <cstdint>

#include "common/ggml_type.h"

namespace fish::qk {

// float_formats.cpp / dequant_legacy.cpp / dequant_k.cpp: blocks -> f32
void dequant_f32(const void* src, float* dst, int64_t n);
void dequant_f16(const void* src, float* dst, int64_t n);
void dequant_bf16(const void* src, float* dst, int64_t n);
void dequant_q4_0(const void* src, float* dst, int64_t nb);
void dequant_q4_1(const void* src, float* dst, int64_t nb);
void dequant_q5_0(const void* src, float* dst, int64_t nb);
void dequant_q5_1(const void* src, float* dst, int64_t nb);
void dequant_q8_0(const void* src, float* dst, int64_t nb);
void dequant_q8_1(const void* src, float* dst, int64_t nb);
void dequant_q2_k(const void* src, float* dst, int64_t nb);
void dequant_q3_k(const void* src, float* dst, int64_t nb);
void dequant_q4_k(const void* src, float* dst, int64_t nb);
void dequant_q5_k(const void* src, float* dst, int64_t nb);
void dequant_q6_k(const void* src, float* dst, int64_t nb);
void dequant_q8_k(const void* src, float* dst, int64_t nb);
void dequant_fq3(const void* src, float* dst, int64_t nb);  // fq3.cpp

// float_formats.cpp / quantize_legacy.cpp / quantize_k.cpp: f32 -> blocks
void quantize_f32(const float* src, void* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
void quantize_q4_0(const float* src, void* dst, int64_t nb);
void quantize_q8_0(const float* src, void* dst, int64_t nb);
void quantize_q8_1(const float* src, void* dst, int64_t nb);
void quantize_q8_k(const float* src, void* dst, int64_t nb);
void quantize_q4_k(const float* src, void* dst, int64_t nb);
void quantize_q5_k(const float* src, void* dst, int64_t nb);
void quantize_q6_k(const float* src, void* dst, int64_t nb);
void quantize_fq3(const float* src, void* dst, int64_t nb);  // fq3.cpp
// Q4_K with the shorter search of online re-quantisation (affine_block.h
// kRequantQ4K): Q6_K / Q5_K -> Q4_K device copies.
void quantize_q4_k_requant(const float* src, void* dst, int64_t nb);

// fq3.cpp: the 32 codes (0..7) of one FQ3 group from its words A, B, C (12
// bytes, little-endian), and back.
void fq3_group_codes(const uint8_t* words, uint8_t q[32]);
void fq3_pack_group(const uint8_t q[32], uint8_t* words);

// vec_dot_ref.cpp: the body of vec_dot_ref (n in elements).
float vec_dot_ref_unchecked(GgmlType t, int64_t n, const void* w, const void* a);

}  // namespace fish::qk
