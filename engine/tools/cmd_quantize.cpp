// fish quantize: re-quantise a GGUF model to Q8_0, Q4_0, Q4_K_M, Q5_K_M or Q6_K.
#include <chrono>
#include <cstdio>
#include <sys/stat.h>

#include "args.h"
#include "command.h"
#include "fish/fish.h"

using namespace fish::cli;

static int cmd_quantize(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish quantize IN.gguf OUT.gguf TYPE [-t N]\n"
                "  TYPE: Q8_0, Q4_0, Q4_K_M, Q5_K_M or Q6_K (llama.cpp's mixes: Q4_K_M / Q5_K_M take\n"
                "  Q6_K for the output projection and for attn_v/ffn_down in some layers, Q4_K / Q5_K\n"
                "  elsewhere; Q6_K is Q6_K throughout). Every matrix is dequantised\n"
                "  and re-quantised; 1-D tensors and all metadata are copied (general.file_type\n"
                "  updated). Matrices whose rows do not fit the type's blocks keep a fitting type\n"
                "  (reported on stderr). -t N: threads (default: one per physical core).\n");
    return 0;
  }
  int64_t threads = 0;
  a.int_value("-t", "--threads", threads);
  const auto pos = a.positional();
  if (pos.size() != 3) a.fail("expects IN OUT TYPE");

  const auto t0 = std::chrono::steady_clock::now();
  fish_error* err = nullptr;
  if (fish_quantize_file(pos[0].c_str(), pos[1].c_str(), pos[2].c_str(), int(threads), &err) != 0) {
    std::fprintf(stderr, "fish quantize: %s\n", fish_error_message(err));
    fish_error_free(err);
    return 1;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  struct stat st {};
  stat(pos[1].c_str(), &st);
  std::fprintf(stderr, "fish quantize: wrote %s (%s, %.1f MiB) in %.1f s\n", pos[1].c_str(), pos[2].c_str(),
               double(st.st_size) / (1 << 20), s);
  return 0;
}

static const Command reg{"quantize", "re-quantise a GGUF model (Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K)", &cmd_quantize};
