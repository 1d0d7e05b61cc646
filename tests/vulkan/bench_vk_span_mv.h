// fish_bench_vk_span --kernels: the span's matvec variants per projection role
// (q/k/v, wo, gate/up as two dispatches or as a pair, down with x·x2 or the
// pair's product), every FISH_VK_SPAN_MV shape (rows per workgroup 1..16 x
// workgroup 64..256) timed as the span runs it: a layer's worth of distinct
// matrix copies (Q4_K_M's types), a barrier after each step, f32 x. Then a
// layer's four matvec steps with the best shape per role, gate/up separate
// or as the pair, against the defaults. Prints the best FISH_VK_SPAN_MV
// (BEST_ENV) and writes it as shell assignments to env_out (MV_SEP, MV_PAIR,
// BEST_ENV) when given.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "span_rig.h"

namespace fish::vktest {

// `copies` device copies of one matrix (distinct buffers: nothing stays in L2
// across a layer's worth of them). The host rows are a few quantised rows
// tiled: the values do not matter for timing, and quantising 58M weights
// would cost seconds.
struct Mat {
  GgmlType type;
  int64_t n_in, n_out;
  std::vector<vk::Weight*> w;
  uint64_t bytes = 0;  // per copy
};
Mat make_mat(vk::VulkanBackend& be, GgmlType type, int64_t n_in, int64_t n_out, int copies, uint64_t seed);
// A span step's dependency: src's writes before the next compute step's reads and writes.
void step_barrier(vk::VulkanBackend& be, VkCommandBuffer cmd,
                  VkPipelineStageFlags src = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                  VkAccessFlags src_access = VK_ACCESS_SHADER_WRITE_BIT);
// "ROWSxWG", as FISH_VK_SPAN_MV spells a shape.
std::string shape_str(vk::SpanMvShape s);

struct SpanMvDims {
  int E = 0, F = 0, QD = 0, KD = 0, copies = 0;  // n_embd, n_ff, q rows, k/v rows, layers' worth
  bool fq3 = false;  // FISH_GPU_REQUANT=3's types: FQ3 where Q4_K_M has Q4_K, Q4_K where it has Q6_K
};
// Device seconds of one recording (median of several runs after a warm-up).
using TimeFn = std::function<double(const std::function<void(VkCommandBuffer)>&)>;

int span_mv_sweep(vk::VulkanBackend& be, const SpanMvDims& d, const TimeFn& time, const std::string& env_out);

// The span matvec on T = 1, 4, 8, 16, 32 rows at once (decode of T sequences:
// token groups above one row, bench_vk_span_rows.cpp) and 64 (the prefill
// kernel, tiled or coopmat, for comparison): Q4_K F x E (gate/up's shape) and
// E x F (down's), `copies` distinct copies with a barrier after each, f32 x
// and (with int8) Q8_K rows quantised beforehand. Prints us per matrix, GB/s
// of weight bytes (a matrix's bytes / its time: T rows still read it once)
// and us per row.
// sweep: then the token-group shapes on sweep_tokens rows (int8, 2..32), the
// fastest against the heuristic's (fish_bench_vk_span --rows --sweep).
int span_rows_bench(vk::VulkanBackend& be, int E, int F, int copies, const TimeFn& time, bool sweep = false,
                    const std::vector<int>& sweep_tokens = {4, 8, 16, 32});

// fish_bench_vk_span --prefill: a T-token chunk's products per matrix shape of a
// layer (f32 x), the prefill kernel on Q4_K_M's types and on F16 weights, in
// TFLOP/s, then the chunk's attention (heads of head_dim) after 0 and 4096
// positions, per-token kernel against query tiles (bench_vk_span_prefill.cpp).
// d.copies and d.fq3 are not used.
int span_prefill_bench(vk::VulkanBackend& be, const SpanMvDims& d, int head_dim, int T, const TimeFn& time);

}  // namespace fish::vktest
