// One weight's kernel check for `fish test-gpu` (test_gpu_capi.cpp,
// test_gpu_requant_capi.cpp): upload the bytes, multiply n_tok = 1, 3, 37,
// 256 random inputs on the backend and compare with the CPU's product of the
// same bytes, element by element against the spec's bound
// 1e-3 · Σ_i colsum_i |x_ti| / n_out (colsum_i = Σ_rows |w_ri|) — or, for a
// backend that quantises activations to int8 as the CPU does, against the
// CPU's own int8 product within 5% of that bound.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include "common/ggml_type.h"

namespace fish {
class ComputeBackend;
class ThreadPool;
}  // namespace fish

namespace fish::capi {

struct GpuCheck {
  std::string name, detail;
  int outcome = 0;  // FISH_CHECK_*
};

// A matrix of n_out rows of n_in values of `type` at data (rows packed);
// `name` starts each check's name. Emits one check per n_tok (or one failed
// upload); returns the number of failures.
int check_gpu_weight(ComputeBackend& be, ThreadPool& pool, const std::string& name, const char* tensor_name,
                     GgmlType type, const uint8_t* data, uint64_t nbytes, int64_t n_in, int64_t n_out,
                     std::mt19937_64& rng, const std::function<void(const GpuCheck&)>& emit);

}  // namespace fish::capi
