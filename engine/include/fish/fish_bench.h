/* libfish public C API: the backend kernel benchmark (`fish bench --kernels`).
 *
 * For every weight type the active compute backend supports (or those listed),
 * a large random matrix is uploaded through the backend (several copies, so a
 * grouped product streams more bytes than any cache holds) and timed: matvec
 * (n_tok 1, all copies in one matmul_group call) in GB/s of weight bytes, the
 * latency of one n_tok = 1 call, and a prefill product in GFLOP/s; the engine's
 * CPU matmul runs on the same matrices for the ratio in one run. */
#ifndef FISH_FISH_BENCH_H
#define FISH_FISH_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "fish/fish.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fish_kernel_bench_params {
  uint32_t struct_size;
  const char* types;     /* "Q4_K,Q6_K"; NULL or "": F32 F16 Q4_0 Q8_0 Q4_K Q5_K Q6_K FQ3 (those supported) */
  const char* shapes;    /* "4096x14336,qwen3-30b-a3b": n_in x n_out matrices and named MoE models (qwen3-30b-a3b,
                            mixtral-8x7b); NULL or "": the 8B's largest three and both MoE models */
  int32_t prefill;       /* tokens of the prefill product; <= 4: none (default 256) */
  int32_t reps;          /* timed repetitions, median reported (default 5) */
  uint64_t group_bytes;  /* bytes a grouped matvec streams at least (default 2 GiB, capped by free memory / 2) */
  int32_t cpu;           /* 1: also time the CPU matmul (default 1) */
  int32_t n_threads;     /* CPU threads, <= 0: one per core */
  int32_t json;          /* 1: JSON instead of a table */
} fish_kernel_bench_params;

FISH_API fish_kernel_bench_params fish_kernel_bench_default_params(void);

/* Runs the benchmark on the process's compute backend. Returns the report (a
 * table or JSON, malloc'd: free with fish_free), or NULL with *err set when
 * there is no backend (the reason says why) or a parameter is bad. */
FISH_API char* fish_kernel_bench(const fish_kernel_bench_params* params, fish_error** err);

#ifdef __cplusplus
}
#endif

#endif
