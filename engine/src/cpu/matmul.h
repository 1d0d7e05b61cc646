// CPU matrix products: y = x · Wᵀ for a GGUF weight matrix W [n_out rows of n_in].
// Activations are quantised once to the weight type's vec_dot_type (int8 blocks
// for quantised weights, as llama.cpp's CPU path does) and the products run as
// fused dequant-dot kernels over the raw blocks (AVX-512 VNNI / AVX2 / scalar,
// chosen at run time), split over the thread pool by rows.
#pragma once
#include <cstdint>

#include "common/ggml_type.h"

namespace fish {

class ThreadPool;

// A weight matrix in GGUF layout: n_out rows of n_in elements, row r at
// data + r * row_bytes.
struct WeightView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  uint64_t row_bytes = 0;
};

// x: [n_tok, n_in] f32 (row-major), y: [n_tok, n_out] f32.
void matmul(ThreadPool& pool, const WeightView& w, const float* x, int n_tok, float* y);

// Several weights with the same n_in and type class applied to one input (q/k/v,
// gate/up): x is quantised once. ys[i]: [n_tok, ws[i].n_out].
void matmul_group(ThreadPool& pool, const WeightView* ws, int n_w, const float* x, int n_tok,
                  float* const* ys);

// Reference: every row dequantised to f32, dot products in double. Slow; used by
// the tests and the plugin conformance suite as ground truth.
void matmul_ref_f32(const WeightView& w, const float* x, int n_tok, float* y);

// Which kernel family runs on this CPU: "avx512-vnni", "avx2" or "scalar".
// FISH_CPU_KERNELS=scalar|avx2|avx512 forces one (for tests and comparisons).
const char* matmul_kernel_name();

// Kernel families, for tests and benchmarks that compare them in one process.
enum class MatmulKernels { Scalar, Avx2, Avx512 };
// Whether this CPU (and build) can run family k.
bool matmul_kernels_supported(MatmulKernels k);
// Overrides the family for every later call in this process (not thread-safe
// against concurrent matmuls); throws fish::Error if the CPU cannot run it.
void matmul_use_kernels(MatmulKernels k);
// Back to the default choice (FISH_CPU_KERNELS or cpuid).
void matmul_use_default_kernels();

}  // namespace fish
