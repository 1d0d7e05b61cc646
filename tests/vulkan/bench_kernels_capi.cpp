// fish_bench_kernels: the backend kernel benchmark through the public C API
// (fish_kernel_bench, fish_bench.h), i.e. what `fish bench --kernels` prints,
// for running before the command line has it and in scripts.
//   fish_bench_kernels [--types T,..] [--shapes AxB,..] [--prefill N] [--reps N]
//                      [--group-mb M] [--no-cpu] [--threads N] [--json]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fish/fish_bench.h"

int main(int argc, char** argv) {
  fish_kernel_bench_params p = fish_kernel_bench_default_params();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--types") p.types = next();
    else if (a == "--shapes") p.shapes = next();
    else if (a == "--prefill") p.prefill = std::atoi(next());
    else if (a == "--reps") p.reps = std::atoi(next());
    else if (a == "--group-mb") p.group_bytes = uint64_t(std::atoll(next())) << 20;
    else if (a == "--no-cpu") p.cpu = 0;
    else if (a == "--threads") p.n_threads = std::atoi(next());
    else if (a == "--json") p.json = 1;
    else {
      std::fprintf(stderr, "usage: %s [--types T,..] [--shapes AxB,..] [--prefill N] [--reps N] [--group-mb M] [--no-cpu] [--threads N] [--json]\n", argv[0]);
      return 2;
    }
  }
  fish_error* err = nullptr;
  char* report = fish_kernel_bench(&p, &err);
  if (!report) {
    std::fprintf(stderr, "fish_bench_kernels: %s\n", err ? fish_error_message(err) : "failed");
    fish_error_free(err);
    return 1;
  }
  std::fputs(report, stdout);
  fish_free(report);
  return 0;
}
