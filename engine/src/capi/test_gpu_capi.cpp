// The kernel part of `fish test-gpu`: the active backend's matmul on a real
// model's blk.0 projections against the CPU f32 reference, with the spec's
// per-element bound (capi/gpu_weight_check.h) — or, for a backend that
// quantises activations to int8 as the CPU does (fish_vulkan's integer dot
// products), against the CPU's own int8 product (fish::matmul) within 5% of
// that bound: the f32 bound is the spec's for f32 activations, which int8
// rounding alone exceeds (as the CPU's own product does).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "capi/capi_util.h"
#include "capi/gpu_weight_check.h"
#include "common/error.h"
#include "cpu/thread_pool.h"
#include "gguf/gguf_file.h"

namespace {

struct Check {
  std::string name, detail;
  int outcome = FISH_CHECK_PASS;
};

void emit(void (*fn)(const fish_plugin_check*, void*), void* ctx, const Check& c) {
  if (!fn) return;
  fish_plugin_check pc{};
  pc.struct_size = sizeof pc;
  pc.name = c.name.c_str();
  pc.outcome = c.outcome;
  pc.detail = c.detail.c_str();
  fn(&pc, ctx);
}

}  // namespace

extern "C" {

FISH_API uint64_t fish_backend_bytes_resident(void) {
  return fish::capi::fenced(uint64_t(0), [] {
    fish::ComputeBackend* be = fish::backend::get();
    return be ? be->bytes_resident() : uint64_t(0);
  });
}

FISH_API char* fish_backend_profile(void) {
  return fish::capi::fenced(static_cast<char*>(nullptr), [] {
    fish::ComputeBackend* be = fish::backend::get();
    return fish::capi::dup_string(be ? be->profile() : std::string());
  });
}

FISH_API int32_t fish_test_gpu_kernels(const char* model_path, void (*fn)(const fish_plugin_check*, void*), void* ctx,
                                       fish_error** err) {
  int32_t failures = -1;
  fish::capi::guarded(err, [&] {
    fish::ComputeBackend* be = fish::backend::get();
    if (!be) throw fish::Error("no compute backend: " + fish::backend::reason());
    auto file = fish::gguf::File::open(model_path);
    failures = 0;
    fish::ThreadPool pool(0);  // the CPU's int8 product, for int8 backends
    std::mt19937_64 rng(1234);
    const auto emit_check = [&](const fish::capi::GpuCheck& c) { emit(fn, ctx, Check{c.name, c.detail, c.outcome}); };
    for (const auto& t : file->tensors()) {
      if (t.name.rfind("blk.0.", 0) != 0 || t.n_dims != 2) continue;
      const int64_t n_in = t.ne[0], n_out = t.ne[1];
      const std::string base = t.name + " " + fish::ggml_type_name(t.type) + " [" + std::to_string(n_out) + "x" +
                               std::to_string(n_in) + "]";
      if (!be->supports(t.type)) {
        emit(fn, ctx, {base, "not supported by the backend (stays on the CPU)", FISH_CHECK_SKIP});
        continue;
      }
      failures += fish::capi::check_gpu_weight(*be, pool, base, t.name.c_str(), t.type, t.data, t.nbytes, n_in, n_out,
                                               rng, emit_check);
    }
  });
  return failures;
}

}  // extern "C"
