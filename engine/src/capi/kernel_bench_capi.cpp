// fish_bench.h: the backend kernel benchmark over the process's compute backend.
#include <algorithm>
#include <cstring>

#include "backend/backend.h"
#include "backend/kernel_bench.h"
#include "capi/capi_util.h"
#include "common/error.h"
#include "fish/fish_bench.h"

extern "C" {

FISH_API fish_kernel_bench_params fish_kernel_bench_default_params(void) {
  fish_kernel_bench_params p{};
  p.struct_size = sizeof p;
  p.prefill = 256;
  p.reps = 5;
  p.group_bytes = 2ull << 30;
  p.cpu = 1;
  return p;
}

FISH_API char* fish_kernel_bench(const fish_kernel_bench_params* params, fish_error** err) {
  char* out = nullptr;
  fish::capi::guarded(err, [&] {
    // Fields past an older caller's struct_size keep their defaults.
    fish_kernel_bench_params p = fish_kernel_bench_default_params();
    if (params) {
      if (params->struct_size < sizeof(uint32_t)) throw fish::Error("fish_kernel_bench: params.struct_size is not set");
      std::memcpy(&p, params, std::min<size_t>(params->struct_size, sizeof p));
      p.struct_size = sizeof p;
    }
    fish::ComputeBackend* be = fish::backend::get();
    if (!be) throw fish::Error("fish_kernel_bench: no compute backend: " + fish::backend::reason());
    fish::KernelBenchOptions o;
    if (p.types && *p.types) o.types = fish::parse_kernel_bench_types(p.types);
    if (p.shapes && *p.shapes) fish::parse_kernel_bench_shapes(p.shapes, o);
    o.prefill = p.prefill;
    o.reps = p.reps > 0 ? p.reps : 5;
    if (p.group_bytes > 0) o.group_bytes = p.group_bytes;
    o.cpu = p.cpu != 0;
    o.n_threads = p.n_threads;
    const fish::KernelBenchReport rep = fish::run_kernel_bench(*be, o);
    out = fish::capi::dup_string(fish::format_kernel_bench(rep, p.json != 0));
    if (!out) throw fish::Error("fish_kernel_bench: out of memory");
  });
  return out;
}

}  // extern "C"
