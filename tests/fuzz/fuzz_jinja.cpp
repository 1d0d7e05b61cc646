// The chat-template libFuzzer target (built with -DFISH_FUZZ=ON and clang):
// every input is a template's source, parsed and rendered by fuzz_template
// (fish chat's and fish serve's path for a GGUF's tokenizer.chat_template).
// A jinja::Error is the expected refusal; an exception of any other type
// aborts here and so counts as a finding, as do crashes, hangs (-timeout),
// allocations past -malloc_limit_mb and ASan / UBSan reports.
// tests/fuzz/run-campaign.sh BUILD_DIR SECONDS jinja runs it.
#include <cstdio>
#include <cstdlib>

#include "fuzz_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fish::fuzz::TemplateOutcome o = fish::fuzz::run_template_bytes(data, size);
  if (!o.clean()) {
    std::fprintf(stderr, "fish fuzz: an exception that is not a jinja::Error: %s\n", o.other.c_str());
    std::abort();
  }
  return 0;
}
