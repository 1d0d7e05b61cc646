// CPU matrix products: y = x · Wᵀ for a GGUF weight matrix W [n_out rows of n_in].
// Activations are quantised once to the weight type's vec_dot_type (int8 blocks
// for quantised weights, as llama.cpp's CPU path does) and the products run as
// fused dequant-dot kernels over the raw blocks (AVX-512 VNNI / AVX2 / scalar,
// chosen at run time), split over the thread pool by rows.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "common/ggml_type.h"

namespace fish {

class ThreadPool;

// How the bytes of a weight are arranged.
enum class WeightLayout : uint8_t {
  Gguf,     // GGUF rows: row r at data + r * row_bytes
  Strips16, // prepare_weight's repack (Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): groups of 16 rows whose
            // blocks are interleaved, same bytes per row as GGUF (row_bytes is
            // the exact GGUF row size; a strip is 16 * row_bytes, the last one
            // padded with zero rows). See cpu/matmul_strips.h.
};

// A weight matrix: n_out rows of n_in elements of type.
struct WeightView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  uint64_t row_bytes = 0;
  WeightLayout layout = WeightLayout::Gguf;
};

// A weight rearranged once, at load, into the layout this CPU's kernels decode
// fastest; it keeps the rearranged bytes alive (shared with the other weights
// of one prepare_weights call). view() is what to pass to matmul. When no
// repack applies, view() is the original view and nothing is held.
class PreparedWeight {
 public:
  PreparedWeight() = default;
  const WeightView& view() const { return view_; }
  bool repacked() const { return view_.layout != WeightLayout::Gguf; }
  // Bytes of the repacked copy of this weight (0 when not repacked).
  uint64_t owned_bytes() const { return owned_bytes_; }

 private:
  friend std::vector<PreparedWeight> prepare_weights(const WeightView* ws, int n, ThreadPool* pool);
  WeightView view_;
  std::shared_ptr<const void> storage_;
  uint64_t owned_bytes_ = 0;
};

// Prepares weights (GGUF layout) for the CPU matmul kernels, once at load.
// With the AVX-512 VNNI or AVX2 family active, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0
// matrices are repacked into 16-row strips (WeightLayout::Strips16): one 64-byte load then carries
// 4 quants of each of 16 rows, so the scales and mins of 16 rows are decoded
// together and an n_tok = 1 product is bound by memory, not by unpacking
// (prompt processing gains too). Results equal those of the original up to
// f32 summation order (the integer block sums are the same). Any other type,
// or another kernel family: the weight is returned unchanged.
//
// Memory: the repacked weights of one call share one allocation, in 2 MiB
// pages where the kernel allows (transparent huge pages: an 800 MB model read
// once per token otherwise walks ~200k page-table entries): the same bytes as
// the originals plus at most 15 zero rows per weight and < 2 MiB in all. The
// originals are not read by matmul again (mmap pages may be dropped), but
// they stay the data for anything else (GPU upload, dequantisation, token
// embeddings). pool (optional) spreads the repack over its threads. Throws
// fish::Error for a view matmul would refuse.
std::vector<PreparedWeight> prepare_weights(const WeightView* ws, int n, ThreadPool* pool = nullptr);
PreparedWeight prepare_weight(const WeightView& w, ThreadPool* pool = nullptr);

// The GGUF bytes of row r of w (any layout) into out (row_bytes of the GGUF
// row of w.type, n_in). For tests and reference paths; slow for strips.
void weight_row_gguf(const WeightView& w, int64_t r, uint8_t* out);

// x: [n_tok, n_in] f32 (row-major), y: [n_tok, n_out] f32.
void matmul(ThreadPool& pool, const WeightView& w, const float* x, int n_tok, float* y);

// Several weights with the same n_in and type class applied to one input (q/k/v,
// gate/up): x is quantised once. ys[i]: [n_tok, ws[i].n_out].
void matmul_group(ThreadPool& pool, const WeightView* ws, int n_w, const float* x, int n_tok,
                  float* const* ys);

// Reference: every row dequantised to f32, dot products in double. Slow; used by
// the tests and the plugin conformance suite as ground truth.
void matmul_ref_f32(const WeightView& w, const float* x, int n_tok, float* y);

// Which kernel family runs on this CPU: "avx512-vnni", "avx2-vnni" (AVX2 +
// AVX-VNNI), "avx2" or "scalar".
// FISH_CPU_KERNELS=scalar|avx2|avxvnni|avx512 (EngineConfig::process()) forces one
// (for tests and comparisons); one this CPU cannot run makes this throw.
const char* matmul_kernel_name();

// Kernel families, for tests and benchmarks that compare them in one process.
enum class MatmulKernels { Scalar, Avx2, AvxVnni, Avx512 };
// Whether this CPU (and build) can run family k.
bool matmul_kernels_supported(MatmulKernels k);
// Overrides the family for every later call in this process (not thread-safe
// against concurrent matmuls); throws fish::Error if the CPU cannot run it.
void matmul_use_kernels(MatmulKernels k);
// Back to the default choice (FISH_CPU_KERNELS or cpuid).
void matmul_use_default_kernels();

}  // namespace fish
