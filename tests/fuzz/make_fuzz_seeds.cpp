// make_fuzz_seeds: writes the fuzz target's seed corpus, or the crafted
// regression files of tests/fuzz/regressions.
//
//   make_fuzz_seeds --seeds DIR [--shared SHARED]   tiny models of each
//       architecture and many tensor types, and vocabulary-only files cut down
//       from SHARED/models/vocab/*.gguf (read in place; default: the shared
//       folder this build was configured with)
//   make_fuzz_seeds --regressions DIR               the crafted files for the
//       bugs issue 22 lists (block_count far beyond the file, an empty
//       vocabulary in each of its forms), each well under 64 KB
#include <sys/stat.h>

#include <cstdio>
#include <exception>
#include <string>

#include "fuzz_models.h"

using namespace fish;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: make_fuzz_seeds --seeds DIR [--shared SHARED]\n"
               "       make_fuzz_seeds --regressions DIR\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, dir, shared = FISH_SHARED_DIR;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--seeds" || a == "--regressions") && i + 1 < argc) {
      mode = a;
      dir = argv[++i];
    } else if (a == "--shared" && i + 1 < argc) {
      shared = argv[++i];
    } else {
      return usage();
    }
  }
  if (dir.empty()) return usage();
  try {
    for (const std::string& p : mode == "--seeds" ? fuzz::write_seeds(dir, shared) : fuzz::write_regressions(dir)) {
      struct stat st {};
      stat(p.c_str(), &st);
      std::printf("%8lld  %s\n", static_cast<long long>(st.st_size), p.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
