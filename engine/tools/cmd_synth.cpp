// fish synth: write a random-weight GGUF with a real model's exact shapes.
#include <chrono>
#include <cstdio>
#include <sys/stat.h>

#include "args.h"
#include "command.h"
#include "fish/fish.h"

using namespace fish::cli;

static int cmd_synth(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish synth --shape SHAPE --type TYPE -o OUT.gguf [--seed S] [-t N]\n"
                "  SHAPE: tiny, llama-1b (Llama 3.2 1B), llama-8b (Llama 3.1 8B),\n"
                "         qwen2-0.5b (Qwen2.5 0.5B), qwen3-0.6b (Qwen3 0.6B),\n"
                "         qwen3-30b-a3b (Qwen3 30B-A3B, MoE), mixtral-8x7b (Mixtral 8x7B, MoE),\n"
                "         tiny-llama3, tiny-qwen2, tiny-qwen3, tiny-qwen3moe, tiny-qwen2moe,\n"
                "         tiny-mixtral (test models)\n"
                "  TYPE:  F32, F16, Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K (llama.cpp's mixes)\n"
                "  Random weights (deterministic for a seed, default 0) with the real model's\n"
                "  tensor names, shapes and metadata, and a synthetic SentencePiece vocabulary.\n"
                "  -t N: threads (default: one per physical core).\n");
    return 0;
  }
  std::string shape, type, out;
  int64_t seed = 0, threads = 0;
  if (!a.value(nullptr, "--shape", shape)) a.fail("missing --shape SHAPE");
  if (!a.value(nullptr, "--type", type)) a.fail("missing --type TYPE");
  if (!a.value("-o", "--output", out)) a.fail("missing -o OUT");
  a.int_value(nullptr, "--seed", seed);
  a.int_value("-t", "--threads", threads);
  if (!a.positional().empty()) a.fail("unexpected argument");

  const auto t0 = std::chrono::steady_clock::now();
  fish_error* err = nullptr;
  if (fish_synth_file(shape.c_str(), type.c_str(), out.c_str(), uint64_t(seed), int(threads), &err) != 0) {
    std::fprintf(stderr, "fish synth: %s\n", fish_error_message(err));
    fish_error_free(err);
    return 1;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  struct stat st {};
  stat(out.c_str(), &st);
  std::fprintf(stderr, "fish synth: wrote %s (%s %s, %.1f MiB) in %.1f s\n", out.c_str(), shape.c_str(), type.c_str(),
               double(st.st_size) / (1 << 20), s);
  return 0;
}

static const Command reg{"synth", "write a random-weight GGUF with a real model's shapes", &cmd_synth};
