// The libFuzzer target (built with -DFISH_FUZZ=ON and clang): every input is a
// GGUF image run through fuzz_one (fish info, the tokenizer-only load, the full
// CPU model load and what fish prints about it). An exception that is a
// fish::Error is the expected refusal; one of any other type (a bare
// std::bad_alloc, an out_of_range) aborts here and so counts as a finding, as
// do crashes, hangs (-timeout), allocations past -malloc_limit_mb and ASan /
// UBSan reports. tests/fuzz/run-campaign.sh runs it.
#include <cstdio>
#include <cstdlib>

#include "fuzz_one.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("FISH_GPU", "0", 1);  // never look for plugins
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fish::fuzz::Outcome o = fish::fuzz::run_bytes(data, size);
  if (!o.clean()) {
    for (const auto* s : {&o.info, &o.vocab, &o.model})
      if (!s->clean) std::fprintf(stderr, "fish fuzz: an exception that is not a fish::Error: %s\n", s->error.c_str());
    std::abort();
  }
  return 0;
}
