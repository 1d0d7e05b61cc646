// fish_vulkan's environment knobs, read in this one place (names from the spec).
//   FISH_GPU=0|off|false|no      no GPU at all (the plugin reports itself unavailable)
//   FISH_GPU=cpu                 allow CPU Vulkan implementations (lavapipe), and only them
//   FISH_GPU_DEVICE=<index>      force the physical device with this enumeration index
//   FISH_VK_QUEUE=universal      use a graphics+compute queue family (default: compute-only if any)
//   FISH_VK_VALIDATE=1           enable VK_LAYER_KHRONOS_validation if installed (messages to the log)
//   FISH_GPU_VERBOSE=1|2         log to stderr when no host logger is given (the host filters otherwise)
//   FISH_VRAM_BUDGET_MB=<n>      the plugin's ceiling on its own allocations (default 85% of free at open)
//   FISH_GPU_PROFILE=1|2         time every submission with GPU timestamps (describe(PROFILE));
//                                2 adds per-stage timestamps inside span forwards
//   FISH_VK_MV_ROWS / FISH_VK_MV_WG  matvec tuning: rows per subgroup (1, 2, 4), workgroup size
//   FISH_VK_SPAN_FUSE=0          spans: separate rmsnorm / RoPE+KV store / add / act·mul kernels
//                                in decode (default 1: folded into matvec and attention kernels)
//   FISH_VK_SPAN_TOKENS=<n>      spans: tokens per submission (work buffers' size; default 128)
//   FISH_VK_ATTN_SPLIT=<n>       spans: target positions per attention split in decode (default 128)
//   FISH_VK_ATTN_MAX_SPLITS=<n>  spans: most splits per (token, KV head) (default 32, at most 128)
//   FISH_VK_SPAN_MV=<spec>       spans, decode: the span matvec's shape per projection, as
//                                `[role=]ROWS[xWG]` items separated by commas (role q: q/k/v,
//                                o: wo, gu: gate/up, d: down; no role: every projection), e.g.
//                                `8x128` or `q=4,gu=8x256,d=16x128`. ROWS: rows per workgroup
//                                (per matrix) 1, 2, 4, 8 or 16; WG: 32, 64, 128 or 256
//   FISH_VK_SPAN_U64=<bits>      spans, int8 decode: the Q4_K / Q5_K matvecs of role bit (1 << role:
//                                2 q/k/v, 4 wo, 8 gate/up, 16 down) take units of 64 elements
//                                instead of 32 (default 10 = q/k/v + gate/up on GPUs, 0 on CPU
//                                implementations)
//   FISH_VK_SPAN_GU=0|1          spans, decode: gate and up as one dispatch that writes
//                                silu(gate)·up (down then reads one vector) (default 0)
//   FISH_VK_SPAN_NORM=0|1        spans, decode: 1/rms of the fused rmsnorm computed by each
//                                consumer from the producer's Σy² partials (1; default), or by
//                                the producer's last workgroup after an arrival counter (0)
//   FISH_VK_INT8=0|1             1: matmuls of Q4_0, Q8_0, Q4_K, Q5_K, Q6_K weights on int8
//                                activations with integer dot products (x quantised on the device
//                                exactly as the CPU does: Q8_K blocks for K-quants, Q8_0 for
//                                Q4_0/Q8_0), when the device has shaderIntegerDotProduct.
//                                Unset: on where the device says 4x8-bit packed signed dot
//                                products are accelerated (H200) or is a CPU implementation
//                                with the feature (lavapipe: the CPU's numbers), else f32;
//                                0 forces f32
//   FISH_VK_SPAN_QFOLD=<bits>    spans, int8 decode: producers that write the next step's int8
//                                rows themselves instead of a quantize_x step: 1 the attention,
//                                2 the wo / down norm epilogues, 4 the gate|up pair; 8: in B32
//                                rows (blocks of 32 that one producer workgroup owns, no arrival
//                                counters; every K-quant decode matvec then reads B32 rows);
//                                16 (with 8): the attention writes f32 only and every wo
//                                workgroup quantises it into B32 rows itself (in place of 1);
//                                32 (with 8): every down workgroup quantises silu(gate)·up
//                                itself (no quantise step before down; not with 4).
//                                Default 11 = 1|2|8 on GPUs (H200 8B decode +6-8%, README), 0 on
//                                CPU implementations; 0: Q8_K rows from quantize_x steps, the
//                                CPU's int8 arithmetic
//   FISH_VK_SPIN=0               wait on fences by blocking only (default: spin briefly on GPUs)
//   FISH_VK_BENCH_FILL_KV=1      BENCHMARKS ONLY: a span forward of more than one token computes
//                                nothing: it zeroes those KV positions and leaves x as it was, so
//                                decode can be timed at a long context without the prompt's cost
#pragma once
#include <cstdint>
#include <string>

namespace fish::vk {

// The span matvec's shape for one projection role; 0: the heuristic's.
struct SpanMvShape {
  uint32_t rows = 0, wg = 0;
};
enum SpanRole : uint32_t { kRoleOther = 0, kRoleQkv = 1, kRoleWo = 2, kRoleGateUp = 3, kRoleDown = 4, kRoles = 5 };

struct VkConfig {
  enum class GpuMode { Default, Off, Cpu };
  GpuMode gpu = GpuMode::Default;
  int device_index = -1;         // -1: automatic selection
  bool queue_universal = false;
  bool validate = false;
  int verbose = 0;
  uint64_t budget_bytes = 0;     // 0: the 85% rule
  bool profile = false;
  int profile_level = 0;         // FISH_GPU_PROFILE: 0 off, 1 per submission, 2 per span stage
  bool span_fuse = true;
  int span_tokens = 128;
  int attn_split = 128;
  int attn_max_splits = 32;
  int attn_heads = -1;           // FISH_VK_ATTN_HEADS: decode query heads per attention workgroup at any
                                 // context (0: a KV group's all); -1: the default (span.cpp)
  bool spin = true;
  int attn_vlate = -1;           // FISH_VK_ATTN_VLATE: -1 default, 0 / 1: the attention's V rows with the K rows /
                                 // after the scores (SpanKernels::set_attn_vlate)
  int span_qsg = -1;             // FISH_VK_SPAN_QSG: -1 default (1), 0: the decode producers' B32 output by the
                                 // workgroup (q8b32_wg), 1: within subgroups where they allow (q8b32_sg)
  bool bench_fill_kv = false;
  int mv_rows = 0;               // 0: heuristic
  int mv_wg = 0;                 // 0: heuristic
  SpanMvShape span_mv[kRoles];   // FISH_VK_SPAN_MV, per SpanRole (0: heuristic)
  int span_u64 = -1;             // FISH_VK_SPAN_U64: -1 default, else role bits (1 << SpanRole)
  int span_gu = -1;              // FISH_VK_SPAN_GU: -1 default, 0 off, 1 on
  int int8 = -1;                 // FISH_VK_INT8: -1 default (on where int8 dot products are accelerated), 0 off, 1 on
  int span_norm = -1;            // FISH_VK_SPAN_NORM: -1 default, 0 last workgroup, 1 consumers
  int span_qfold = -1;           // FISH_VK_SPAN_QFOLD: -1 default, else bits of the int8 producers that quantise
                                 // their output (1 attention, 2 norm epilogues, 4 gate|up pair; 0: quantize_x)
  int span_i8 = -1;              // FISH_VK_SPAN_I8: -1 default, else bits of the span decode matvecs that take
                                 // int8 x (1 q, 2 k, 4 v, 8 o, 16 gate, 32 up, 64 down, 128 head); the others f32
  std::string error;             // a knob with a value that makes no sense (names it)

  static VkConfig from_env();
  // Parses a FISH_VK_SPAN_MV value into out[kRoles]; false (and *why) when malformed.
  static bool parse_span_mv(const std::string& spec, SpanMvShape* out, std::string* why);
};

}  // namespace fish::vk
