// fish: the command line. Each sub-command lives in cmd_<name>.cpp.
#include <cstdio>
#include <cstring>

#include "fish/fish.h"

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--version")) {
    std::printf("fish %s\n", fish_version());
    return argc < 2 ? 2 : 0;
  }
  std::fprintf(stderr, "fish: unknown command '%s'\n", argv[1]);
  return 2;
}
