// The fish command line: results on stdout, one clear error line and a
// non-zero exit for bad input.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <catch2/catch.hpp>

#include "e2e_util.h"
#include "test_paths.h"

using namespace fish::test;

static std::string fish_cmd(const std::string& args, int* st, bool keep_stderr = false) {
  return run_command("FISH_GPU=0 " + bin_path("fish") + " " + args + (keep_stderr ? " 2>&1" : " 2>/dev/null"), st);
}

TEST_CASE("fish run --ids --temp 0 gives the reference greedy ids", "[e2e][cli]") {
  int st = -1;
  const std::string out = fish_cmd("run -m " + model_path("stories260K.gguf") + " -n 12 --temp 0 --ids -t 2", &st);
  CHECK(st == 0);
  CHECK(out == "403 407 261 378 432 383 286 261 376 298 315 421\n");
}

TEST_CASE("fish run streams the greedy text", "[e2e][cli]") {
  int st = -1;
  const std::string out =
      fish_cmd("run -m " + model_path("stories260K.gguf") + " -p 'Once upon a time' -n 16 --temp 0 -t 2", &st);
  CHECK(st == 0);
  CHECK(out.rfind(", there was a little girl named Lily.", 0) == 0);
}

TEST_CASE("fish tokenize prints the model's token ids", "[e2e][cli]") {
  int st = -1;
  ModelHandle h(model_path("stories260K.gguf"));
  const auto ids = tokenize(h.m, "Once upon a time", true);
  std::string want;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) want += ' ';
    want += std::to_string(ids[i]);
  }
  CHECK(fish_cmd("tokenize -m " + model_path("stories260K.gguf") + " -p 'Once upon a time'", &st) == want + "\n");
  CHECK(st == 0);
  CHECK(ids.front() == 1);
  const std::string no_bos = fish_cmd("tokenize -m " + model_path("stories260K.gguf") + " -p 'Once upon a time' --no-bos", &st);
  CHECK(no_bos == want.substr(2) + "\n");
}

TEST_CASE("fish errors: one line and a non-zero exit", "[e2e][cli]") {
  int st = 0;
  std::string out = fish_cmd("run -m /nonexistent/model.gguf -p hi", &st, true);
  CHECK(st == 1);
  CHECK(out.find("/nonexistent/model.gguf") != std::string::npos);
  CHECK(out.find("cannot open") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);

  out = fish_cmd("run -m " + model_path("stories260K.gguf") + " --no-such-flag", &st, true);
  CHECK(st == 2);
  CHECK(out.find("unknown option '--no-such-flag'") != std::string::npos);

  out = fish_cmd("run -m " + model_path("vocab/ggml-vocab-gpt-2.gguf") + " -p hi", &st, true);
  CHECK(st == 1);
  CHECK(out.find("unsupported architecture 'gpt2'") != std::string::npos);

  out = fish_cmd("run -m " + model_path("legacy/tinyllamas-stories-260k-f32.ggufv1.gguf"), &st, true);
  CHECK(st == 1);
  CHECK(out.find("version 1 is not supported") != std::string::npos);

  out = fish_cmd("frobnicate", &st, true);
  CHECK(st == 2);
  CHECK(out.find("unknown command 'frobnicate'") != std::string::npos);
}

// fish tokenize on the vocab-only GGUFs prints the ids of the tokenizer tests
// (models/vocab/*.inp -> .out, no BOS).
TEST_CASE("fish tokenize prints the ids of the vocab test cases", "[e2e][cli]") {
  for (const char* vocab : {"gpt-2", "llama-spm", "deepseek-llm", "falcon"}) {
    const std::string base = model_path(std::string("vocab/ggml-vocab-") + vocab + ".gguf");
    std::ifstream inp(base + ".inp", std::ios::binary), out(base + ".out");
    REQUIRE((inp.good() && out.good()));
    std::stringstream ss;
    ss << inp.rdbuf();
    const std::string all = ss.str(), sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> cases;
    for (size_t at = 0;;) {
      const size_t k = all.find(sep, at);
      cases.push_back(all.substr(at, k == std::string::npos ? std::string::npos : k - at));
      if (k == std::string::npos) break;
      at = k + sep.size();
    }
    std::string line;
    char tmpl[] = "/tmp/fish-tok-XXXXXX";
    const int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    close(fd);
    for (size_t i = 0; i < cases.size() && std::getline(out, line); ++i) {
      if (i % 5) continue;  // every fifth case keeps the test fast; the tokenizer tests run them all
      std::ofstream(tmpl, std::ios::binary) << cases[i];
      int st = -1;
      std::string got = fish_cmd("tokenize -m " + base + " -f " + tmpl + " --no-bos", &st);
      auto ids = [](const std::string& t) {
        std::vector<long> v;
        std::stringstream is(t);
        long x;
        while (is >> x) v.push_back(x);
        return v;
      };
      INFO(vocab << " case " << i << ": " << got);
      CHECK(st == 0);
      CHECK(ids(got) == ids(line));
    }
    std::remove(tmpl);
  }
}
