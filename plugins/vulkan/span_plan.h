// A span forward as data: the steps one command buffer holds, in order. Span::plan
// (span_plan.cpp) builds them from the layers' description and the forward's
// shape; Span::record (span_record.cpp) records them with one loop. Each step
// names its kernel with that kernel's parameters, the arena regions it reads
// and writes, the barrier that follows it, and the profile stage it closes.
#pragma once
#include <cstdint>
#include <variant>
#include <vector>

#include "kernels.h"
#include "moe_kernels.h"
#include "span_kernels.h"
#include "weight.h"

namespace fish::vk {

// What a step reads or writes (the arena's regions, ArenaLayout, and the buffers around it).
enum class Region : uint8_t {
  Staging,    // host-visible: the ctrl block and x in
  Ctrl,       // the arena's ctrl block: position, attention grid, layer 0's 1/rms
  X,          // the residual stream (+ decode: layer 0's x·attn_norm after it)
  XNorm,      // the next matmul's input: x·norm (its 1/rms applied by the consumer) or rmsnorm(x)
  NormSums,   // Σy² partials of a norm epilogue (the consumers reduce them to 1/rms)
  Qkv,        // q | k | v projections
  QRoped,     // roped q rows (RoPE / KV-store kernel)
  Kv,         // the layer's f16 KV cache
  Attn,       // attention output
  AttnParts,  // the attention's partials per split (within its step)
  Gate,       // gate (silu) or silu(gate)·up
  Up,
  Rows,       // int8 rows of a matmul input (quantise steps, or a producer's B32 rows)
  RowsOther,  // B32 decode: the second int8 rows region (a producer writes the one its input is not in)
  Logits,     // host-visible: the head's output
  Readback,   // host-visible: x out
  Meta,       // the row table: rows' positions and page tables, the rows whose logits are wanted
  RouterLogits,  // MoE: the router's logits
  Route,         // MoE: the routing words (chosen experts, weights, pairs grouped by expert)
  ExpertHidden,  // MoE: the chosen experts' silu(gate)·up rows
  ExpertOut,     // MoE: their weighted down rows
  SharedOut,     // MoE: the shared expert's down rows
};

// The kernels a step can run, each with its parameters.
struct CopyStep {  // copy_u4: n16 16-byte words between the staging buffers and the arena
  VkDescriptorSet set;
  uint32_t n16;
};
struct RmsNormStep {  // span_rmsnorm.comp
  VkDescriptorSet set;
  SpanPush push;
  bool gather = false;  // the rows listed in the row table (the head's)
  bool half = false;    // f16 rows (the coopmat prefill's x, SpanFusion::xh)
};
struct QuantizeStep {  // quantize_x.comp: a matmul input to int8 rows
  QuantPush push;
  uint32_t block;  // 256 (Q8_K) or 32 (Q8_0, or B32 with b32)
  bool xprod;      // x·x2
  bool b32;
};
struct MatmulStep {  // one projection: every chunk of a weight (matvec_span.comp / matmul_tiled*.comp)
  const Weight* weight;
  std::vector<VkDescriptorSet> sets;  // one per chunk
  SpanMatmulPush push;   // the chunk's rows and y offset are added per chunk
  SpanFusion fusion;
};
struct RopeStoreStep {  // span_rope_store.comp
  VkDescriptorSet set;
  SpanPush push;
  SpanKernelShape shape;
  bool multi = false;  // rows of several sequences (the row table)
};
struct AttentionStep {  // span_attention.comp (tiles: span_attention_tiles.comp)
  VkDescriptorSet set;
  SpanPush push;
  SpanKernelShape shape;
  bool fused;
  bool multi = false;
  bool tiles = false;  // a prompt chunk on query tiles (span_attention_tiles.comp)
  bool half = false;   // tiles: f16 output rows (wo's x, SpanFusion::xh)
};
struct MoeRouteStep {  // moe_route.comp
  VkDescriptorSet set;
  MoePush push;
};
struct MoeMatvecStep {  // moe_matvec.comp (mvm_<T>): gate|up (pair) or down of the chosen experts
  const Weight* weight;
  VkDescriptorSet set;
  MoePush push;
  bool pair;
  bool sum = false;   // down summed into x (decode: MoeKernels::kSumTokens)
  bool next = false;  // sum: + the next rmsnorm's x·norm and Σx² partials
  bool int8 = false;  // x is B32 rows (mvmi_<T>)
};
struct MoeTiledStep {  // matmul_tiled.comp FISH_MOE (tlm_<T>): one of a prompt chunk's expert products
  const Weight* weight;
  VkDescriptorSet set;
  MoePush push;
  MoeKernels::TiledEpi epi;
  bool gate_up;  // x rows by token (gate, up), else by pair (down)
};
struct MoeCombineStep {  // moe_combine.comp
  VkDescriptorSet set;
  MoePush push;
};
using SpanKernel = std::variant<CopyStep, RmsNormStep, QuantizeStep, MatmulStep, RopeStoreStep, AttentionStep,
                                MoeRouteStep, MoeMatvecStep, MoeTiledStep, MoeCombineStep>;

// The dependency recorded after a step.
enum class Barrier : uint8_t {
  None,           // the next step does not read what this one writes (q, k, v side by side)
  Compute,        // compute -> compute
  ComputeDraw,    // compute -> compute and indirect dispatch (the ctrl block holds the attention's grid)
  Host,           // everything -> host reads (the forward's end)
};

struct SpanStep {
  SpanKernel kernel;
  std::vector<Region> reads, writes;
  Barrier barrier = Barrier::Compute;
  const char* stage = nullptr;     // FISH_GPU_PROFILE=2: the profile stage this step closes
  const char* category = nullptr;  // and its category
};

struct SpanPlan {
  std::vector<SpanStep> steps;
};

}  // namespace fish::vk
