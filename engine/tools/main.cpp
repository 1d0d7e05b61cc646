// fish: the command line. Each sub-command lives in cmd_<name>.cpp and is built
// on libfish's C API alone. Results go to stdout; progress and statistics to stderr.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "command.h"
#include "fish/fish.h"

namespace fish::cli {

static std::vector<const Command*>& registry() {
  static std::vector<const Command*> r;
  return r;
}

Command::Command(const char* n, const char* h, CommandFn f) : name(n), help(h), fn(f) { registry().push_back(this); }

const std::vector<const Command*>& commands() { return registry(); }

}  // namespace fish::cli

static void usage(FILE* to) {
  std::fprintf(to, "fish %s: run GGUF language models on the CPU, with GPU offload through plugins\n\n", fish_version());
  std::fprintf(to, "usage: fish <command> [options]   (fish <command> --help for its options)\n\ncommands:\n");
  auto cmds = fish::cli::commands();
  std::sort(cmds.begin(), cmds.end(), [](auto* a, auto* b) { return std::strcmp(a->name, b->name) < 0; });
  for (auto* c : cmds) std::fprintf(to, "  %-12s %s\n", c->name, c->help);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) {
    std::printf("fish %s\n", fish_version());
    return 0;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (auto* c : fish::cli::commands())
    if (!std::strcmp(c->name, argv[1])) return c->fn(argc - 1, argv + 1);
  std::fprintf(stderr, "fish: unknown command '%s' (fish --help lists them)\n", argv[1]);
  return 2;
}
