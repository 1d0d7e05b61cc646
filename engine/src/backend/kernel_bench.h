// A backend-generic kernel benchmark (`fish bench --kernels`): for every weight
// type the backend supports, a large random matrix is uploaded through
// ComputeBackend (as several copies, so a grouped product streams far more
// bytes than any cache holds) and timed:
//   matvec   n_tok = 1 over all copies in one matmul_group call (one submit):
//            GB/s of weight bytes, wall clock, submit and copies included
//   call     one copy alone, n_tok = 1: the latency a stage-1 matmul pays
//   prefill  n_tok = `prefill` on one copy: GFLOP/s (2·n_in·n_out·n_tok)
// and, for the ratio in the same run, the engine's CPU matmul on the same
// matrix (int8-activation kernels, thread pool).
// MoE rows (backends with spans): a span of a model's MoE layers whose experts
// are the measured type (attention reduced to one F16 head of 32, for
// K-quants two heads of 128 in the same type, as a K-quant model's span takes
// its decode on B32 rows; an f32
// router per layer, expert stacks cycled over as many copies as group_bytes
// allows, so the chosen experts come from memory, not a cache):
//   decode   one token through all layers: GB/s of the k chosen experts'
//            gate/up/down bytes read per token over the forward's wall clock
//            (router, routing, attention and submit included: a lower bound
//            of the expert kernels' own rate; FISH_GPU_PROFILE splits it)
//   layer    that forward's time per layer
//   prefill  `prefill` tokens: GFLOP/s of the experts' products (2·3·E·F·k per token);
//            skipped (0) where one token's time × prefill passes 20 s
//   profile  the backend's stage profile of those forwards, where it keeps one
//            (fish_vulkan with FISH_GPU_PROFILE=2), printed below the table
// and the CPU's matmul over one token's k experts (the same bytes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/compute_backend.h"
#include "common/ggml_type.h"

namespace fish {

struct KernelBenchShape {
  int64_t n_in = 0, n_out = 0;
};

// An MoE layer shape: n_embd, rows of an expert's gate/up, experts, used per token, layers.
struct KernelBenchMoeShape {
  std::string name;
  int64_t n_embd = 0, n_ff = 0;
  int n_expert = 0, n_used = 0, n_layers = 0;
};

struct KernelBenchOptions {
  std::vector<GgmlType> types;          // empty: F32 F16 Q4_0 Q8_0 Q4_K Q5_K Q6_K FQ3, those supported
  std::vector<KernelBenchShape> shapes; // empty: the 8B's largest (4096->14336, 14336->4096, 4096->128256)
  // MoE rows; empty: kernel_bench_moe_shapes() when `shapes` is empty too,
  // none when shapes were given. F32 is not timed as experts.
  std::vector<KernelBenchMoeShape> moe_shapes;
  int prefill = 256;                    // tokens of the prefill measurement; <= 4: skipped
  int reps = 5;                         // timed repetitions; the median is reported
  int warm_ms = 300;                    // repeat each measurement this long first (a GPU idles at a low clock)
  uint64_t group_bytes = 2ull << 30;    // a grouped call streams at least this much (capped by memory_free / 2)
  bool cpu = true;                      // also time the CPU matmul on the same matrices
  int n_threads = 0;                    // CPU threads (<= 0: one per core)
  uint64_t seed = 1;
};

struct KernelBenchRow {
  std::string type;
  int64_t n_in = 0, n_out = 0;
  uint64_t matrix_bytes = 0;
  int copies = 0;
  double matvec_gbs = 0;       // backend, n_tok = 1, grouped
  double call_us = 0;          // backend, one matrix, n_tok = 1
  double prefill_gflops = 0;   // backend, n_tok = prefill
  double cpu_matvec_gbs = 0;   // engine CPU, n_tok = 1
  double cpu_prefill_gflops = 0;
  std::string error;           // non-empty: this row failed (upload refused, ...)
};

struct KernelBenchMoeRow {
  std::string type;
  KernelBenchMoeShape shape;
  uint64_t token_bytes = 0;    // the k experts' gate/up/down bytes of all layers: read per token
  int copies = 0;              // distinct expert stack sets the layers cycle over
  double decode_gbs = 0;       // token_bytes / one-token forward
  double layer_us = 0;         // one-token forward / layers
  double prefill_gflops = 0;   // experts' FLOPs of `prefill` tokens / that forward
  double cpu_gbs = 0;          // engine CPU: one token's k experts of one layer
  std::string profile;         // the backend's profile() of the timed forwards (FISH_GPU_PROFILE; "" without)
  std::string error;
};

struct KernelBenchReport {
  std::string backend;         // describe() of the backend
  int prefill = 0;
  int cpu_threads = 0;
  std::vector<KernelBenchRow> rows;
  std::vector<KernelBenchMoeRow> moe_rows;
};

// Throws fish::Error for bad options; a failing row keeps its reason in .error.
KernelBenchReport run_kernel_bench(ComputeBackend& be, const KernelBenchOptions& opts);

// llama-bench-like table, or JSON (one object with a "rows" array).
std::string format_kernel_bench(const KernelBenchReport& r, bool json);

// The named MoE shapes: qwen3-30b-a3b (2048 x 768, 8 of 128, 48 layers), mixtral-8x7b (4096 x 14336, 2 of 8, 32).
const std::vector<KernelBenchMoeShape>& kernel_bench_moe_shapes();
// "4096x14336,qwen3-30b-a3b" -> o.shapes (n_in x n_out items) and o.moe_shapes (the names above);
// "Q4_K,Q6_K" -> types. Throw fish::Error naming the bad item.
void parse_kernel_bench_shapes(const std::string& s, KernelBenchOptions& o);
std::vector<GgmlType> parse_kernel_bench_types(const std::string& s);

}  // namespace fish
