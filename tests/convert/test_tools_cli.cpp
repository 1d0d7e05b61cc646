// The tools through libfish's C API and the built `fish` binary: fish info /
// synth / quantize print what they should, and fail with one clear line and a
// non-zero exit status.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "scratch_dir.h"
#include "fish/fish.h"
#include "test_paths.h"

using namespace fish;

namespace {
struct Proc {
  int status = -1;
  std::string out;
};
// Runs a shell command, capturing stdout (and stderr when asked).
Proc run(const std::string& cmd) {
  Proc p;
  FILE* f = ::popen(cmd.c_str(), "r");
  REQUIRE(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) p.out.append(buf, n);
  const int st = ::pclose(f);
  p.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return p;
}
const std::string kFish = test::bin_path("fish");
}  // namespace

TEST_CASE("tools C API: fish_describe_file", "[convert][capi]") {
  fish_error* err = nullptr;
  char* text = fish_describe_file(test::model_path("stories260K.gguf").c_str(), &err);
  REQUIRE(text);
  CHECK_THAT(std::string(text), Catch::Contains("block count        5\n") && Catch::Contains("parameters         292800"));
  fish_free(text);
  CHECK(fish_describe_file("/no/such.gguf", &err) == nullptr);
  REQUIRE(err);
  CHECK_THAT(std::string(fish_error_message(err)), Catch::Contains("/no/such.gguf: cannot open"));
  fish_error_free(err);
}

TEST_CASE("tools C API: fish_synth_file and fish_quantize_file", "[convert][capi]") {
  test::ScratchDir dir("tools_capi");
  fish_error* err = nullptr;
  const std::string a = dir.file("a.gguf"), b = dir.file("b.gguf");
  REQUIRE(fish_synth_file("tiny", "Q8_0", a.c_str(), 5, 2, &err) == 0);
  REQUIRE(fish_quantize_file(a.c_str(), b.c_str(), "Q4_K_M", 2, &err) == 0);
  char* text = fish_describe_file(b.c_str(), &err);
  REQUIRE(text);
  CHECK_THAT(std::string(text), Catch::Contains("tensors            39 (F32 9, Q4_K 25, Q6_K 5)"));
  fish_free(text);
  CHECK(fish_synth_file("huge", "Q8_0", a.c_str(), 5, 2, &err) != 0);
  REQUIRE(err);
  CHECK_THAT(std::string(fish_error_message(err)), Catch::Contains("unknown shape 'huge'"));
  fish_error_free(err);
  err = nullptr;
  CHECK(fish_quantize_file(a.c_str(), b.c_str(), nullptr, 2, &err) != 0);
  REQUIRE(err);
  fish_error_free(err);
}

TEST_CASE("fish info / synth / quantize commands", "[convert][cli]") {
  REQUIRE(std::filesystem::exists(kFish));
  Proc p = run(kFish + " info " + test::model_path("stories260K.gguf"));
  CHECK(p.status == 0);
  CHECK_THAT(p.out, Catch::Contains("embedding length   64\n") && Catch::Contains("tensors            48 (F32 48)"));

  // A bad file: exit 1 and exactly one line, on stderr, naming the file.
  p = run(kFish + " info " + test::model_path("legacy/tinyllamas-stories-260k-f32.ggufv1.gguf") + " 2>&1 >/dev/null");
  CHECK(p.status == 1);
  CHECK(std::count(p.out.begin(), p.out.end(), '\n') == 1);
  CHECK_THAT(p.out, Catch::StartsWith("fish info: ") && Catch::Contains("ggufv1.gguf: version"));

  test::ScratchDir dir("tools_cli");
  const std::string s = dir.file("s.gguf"), q = dir.file("q.gguf");
  p = run(kFish + " synth --shape tiny --type F16 -o " + s + " --seed 3 -t 2 2>&1");
  CHECK(p.status == 0);
  CHECK_THAT(p.out, Catch::Contains("wrote " + s));
  p = run(kFish + " quantize " + test::model_path("stories260K.gguf") + " " + q + " Q8_0 -t 2 2>&1");
  CHECK(p.status == 0);
  // The 172-wide ffn_down matrices are reported on stderr.
  CHECK_THAT(p.out, Catch::Contains("fish quantize: blk.0.ffn_down.weight: row length 172"));
  p = run(kFish + " info " + q);
  CHECK_THAT(p.out, Catch::Contains("file type          7 (MOSTLY_Q8_0)") &&
                        Catch::Contains("tensors            48 (F32 16, Q8_0 32)"));
  p = run(kFish + " synth --shape nope --type Q8_0 -o " + s + " 2>&1");
  CHECK(p.status == 1);
  CHECK_THAT(p.out, Catch::StartsWith("fish synth: ") && Catch::Contains("unknown shape 'nope'"));
  p = run(kFish + " quantize " + s + " " + q + " 2>&1");
  CHECK(p.status == 2);  // usage error
}
