// Internal interface between the matmul driver (matmul.cpp) and the kernel
// families (scalar, AVX2, AVX-512). Not part of the engine's API.
//
// A family is a table: for every weight type, the kernel that computes a block
// of outputs and the activation layout that kernel reads. The driver quantises
// the activations once per call into that layout and splits rows over threads.
//
// ODR caution: the *_avx2.cpp / *_avx512.cpp files are compiled with wider
// instruction sets. Anything they define must have internal linkage (anonymous
// namespace) or a family-specific name, and they must not call inline functions
// or templates that baseline files also instantiate (the linker would keep one
// copy, possibly the AVX-512 one). This header therefore holds plain data only.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fish {
struct WeightView;
}

namespace fish::mm {

// How the activations x [n_tok, n_in] f32 are presented to a kernel, one row per
// token at act + t * act_stride.
enum class ActLayout : int {
  F32,     // x itself, no copy (F32/F16/BF16 weights)
  Q8_0,    // ggml's BlockQ8_0 row (scalar kernels of Q4_0, Q5_0, Q8_0)
  Q8_1,    // ggml's BlockQ8_1 row (scalar kernels of Q4_1, Q5_1)
  Q8_K,    // ggml's BlockQ8_K row (scalar kernels of the K-quants)
  // SIMD layouts: the same int8 values as the ggml format (bit for bit), split
  // into planes so a kernel's loads are contiguous and aligned.
  X8_32,   // qs int8 [n_in] | dx f32 [n_in/4] | sa f32 [n_in/32] | bs int32
           //   [n_in/32]: the values of Q8_0; dx = each block's d (f16-rounded)
           //   repeated 8 times (one per int32 lane of a 32-element dot), sa = d
           //   * Σ qs of the block, bs = Σ qs (the strips' exact offset term)
  X8_32S,  // as X8_32 with the values of Q8_1: sa = the f16-rounded s of Q8_1
  X8_K,    // qs int8 [n_in] | d f32 [n_in/256] | sf f32 [n_in/16]: the values of
           //   Q8_K; sf = d * bsum of each 16-group
  X8_KS,   // for 16-row strips: qs int8 [n_in] | d f32 [n_in/256] | bs32 int16
           //   [n_in/32] | nb16 int32 [n_in/16]: the values of Q8_K; bs32 =
           //   sum of each 32-group (Q4_K mins), nb16 = -32 * sum of each
           //   16-group (Q6_K's -32 offset)
  Count
};

namespace {  // internal linkage: also compiled into the SIMD files (see above)

constexpr uint64_t pad64(uint64_t n) { return (n + 63) & ~uint64_t(63); }

// Byte offsets of the planes of an X8_32 / X8_32S row of n elements.
struct X8_32Planes {
  uint64_t dx, sa, bs, total;
};
constexpr X8_32Planes x8_32_planes(int64_t n) {
  const uint64_t qs = pad64(uint64_t(n)), dx = pad64(uint64_t(n) / 32 * 8 * 4), sa = pad64(uint64_t(n) / 32 * 4);
  return {qs, qs + dx, qs + dx + sa, qs + dx + 2 * sa};
}

// Byte offsets of the planes of an X8_K row of n elements.
struct X8_KPlanes {
  uint64_t d, sf, total;
};
constexpr X8_KPlanes x8_k_planes(int64_t n) {
  const uint64_t qs = pad64(uint64_t(n)), d = pad64(uint64_t(n) / 256 * 4), sf = pad64(uint64_t(n) / 16 * 4);
  return {qs, qs + d, qs + d + sf};
}

// Byte offsets of the planes of an X8_KS row of n elements.
struct X8_KSPlanes {
  uint64_t d, bs32, nb16, total;
};
constexpr X8_KSPlanes x8_ks_planes(int64_t n) {
  const uint64_t qs = pad64(uint64_t(n)), d = pad64(uint64_t(n) / 256 * 4), bs = pad64(uint64_t(n) / 32 * 2),
                 nb = pad64(uint64_t(n) / 16 * 4);
  return {qs, qs + d, qs + d + bs, qs + d + bs + nb};
}

}  // namespace

// Bytes of one activation row of n_in elements in layout l. F32 is x itself
// (n_in * 4); every other layout is padded to a multiple of 64 so each row
// starts on a cache line.
uint64_t act_row_bytes(ActLayout l, int64_t n_in);

// One kernel call: for every row r in [r0, r1) and token t in [0, n_tok),
//   y[t * ldy + r] = dot(weight row r, activation row t).
// Strip kernels (WType::*_S16): w is strip 0, strip s at w + s * 16 * w_stride
// (w_stride = the GGUF row bytes), and r0 is a multiple of 16.
struct KernelArgs {
  const uint8_t* w = nullptr;  // weight row 0 (raw GGUF blocks)
  uint64_t w_stride = 0;       // bytes between weight rows
  int64_t n_in = 0;            // elements per row (a multiple of the block size)
  const uint8_t* act = nullptr;  // activation row 0, in the kernel's layout
  uint64_t act_stride = 0;       // bytes between activation rows
  int n_tok = 0;
  float* y = nullptr;
  int64_t ldy = 0;  // floats between output rows of y (= n_out)
  int64_t r0 = 0, r1 = 0;
};
using KernelFn = void (*)(const KernelArgs&);

// Converts one row of n_in floats into layout l at dst (act_row_bytes(l, n_in)).
using QuantizeFn = void (*)(ActLayout l, const float* x, int64_t n_in, uint8_t* dst);

// Indices of the weight types fish multiplies with (dense, for the tables).
// *_S16: the 16-row strips of prepare_weight (WeightLayout::Strips16), kept
// together from Q4_K_S16 to Q8_0_S16 (active_family_has_strips walks them).
enum class WType : int {
  F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_K_S16, Q5_K_S16, Q6_K_S16, Q4_0_S16, Q4_1_S16, Q5_0_S16, Q5_1_S16, Q8_0_S16,
  FQ3,  // fish's re-quantised device layout: scalar reference kernel only (CPU checks of device kernels)
  Count
};

// Plain aggregates without constructors (value-initialise with {}): an inline
// constructor instantiated in a SIMD file could be the copy the linker keeps.
struct KernelEntry {
  KernelFn fn;  // null: the family has no kernel of its own (use scalar)
  ActLayout layout;
};

struct KernelFamily {
  const char* name;
  KernelEntry entry[int(WType::Count)];
  // Quantiser for the SIMD layouts this family's kernels read (null if none).
  QuantizeFn quantize;
};

// The tables. scalar is always there; the others return nullptr when the build
// has no such variant (non-x86 targets). Callers check the CPU first.
const KernelFamily* family_scalar();
const KernelFamily* family_avx2();
const KernelFamily* family_avxvnni();  // AVX2's, with the strip kernels on AVX-VNNI's vpdpbusd
const KernelFamily* family_avx512();

// Whether the kernel family in use has its own strip kernels (prepare_weight
// repacks only then; the scalar family reads strips through a slow fallback).
bool active_family_has_strips();

// The driver's choice for a weight (matmul.cpp), for other drivers of the same
// kernels (matmul_batch.cpp): the active family and its entry for w's type and
// layout (the scalar one where the family has none). Throws fish::Error for a
// weight matmul would refuse, `what` naming the caller.
const KernelFamily& active_kernel_family();
KernelEntry resolve_kernel(const KernelFamily& fam, const WeightView& w, const char* what);

// Scalar quantisers of the ggml layouts (Q8_0, Q8_1, Q8_K) and F32 (a copy).
void quantize_act_scalar(ActLayout l, const float* x, int64_t n_in, uint8_t* dst);

}  // namespace fish::mm
