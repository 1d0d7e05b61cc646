// A test case that cannot run here says so, and CTest counts it as skipped
// (never as passed): FISH_SKIP("no Vulkan device") prints one line
//   FISH-SKIPPED: no Vulkan device
// and returns from the TEST_CASE (use it at the case's top level, not inside a
// SECTION or a helper); tests/CMakeLists.txt gives every discovered case
// SKIP_REGULAR_EXPRESSION "FISH-SKIPPED:". A part of a case that cannot run
// while the rest does is not a skip: say so with WARN and run the rest.
// (Catch2 2.x, Debian 12's, has no skip of its own.)
#pragma once
#include <cstdio>
#include <string>

namespace fish::test {
inline void print_skip(const std::string& why) {
  std::printf("FISH-SKIPPED: %s\n", why.c_str());
  std::fflush(stdout);
}
}  // namespace fish::test

#define FISH_SKIP(why)                 \
  do {                                 \
    ::fish::test::print_skip(why);     \
    return;                            \
  } while (0)
