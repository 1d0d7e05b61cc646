// fish run / fish bench with speculative decoding, through the fish binary:
// the same greedy text as without a draft on every test model (the model as
// its own draft, another model of its vocabulary, n-gram lookup), across
// context shifts; the acceptance report; one clear line for each refusal.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <string>
#include <catch2/catch.hpp>

#include "test_paths.h"

using fish::test::bin_path;
using fish::test::model_path;

namespace {

std::string run(const std::string& args, int* status, bool keep_stderr = false) {
  const std::string cmd = "FISH_GPU=0 " + bin_path("fish") + " " + args + (keep_stderr ? " 2>&1" : " 2>/dev/null");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

const char* const kModels[] = {"stories260K.gguf", "TinyStories-656K-Q8_0.gguf", "TinyStories-656K-Q4_0.gguf",
                               "llama-2-tiny-random.gguf", "synth-tiny-Q4_K_M.gguf"};

const std::string kPrompt = "-p 'One day, Tom and Sue went to the park. Tom said hi. One day, Tom and Sue went to the'";

}  // namespace

TEST_CASE("fish run --model-draft and --lookup print plain decoding's greedy text on every test model", "[e2e][spec]") {
  for (const char* name : kModels) {
    INFO(name);
    const std::string base = "run -m " + model_path(name) + " " + kPrompt + " -n 40 --temp 0 -t 2 ";
    int st = -1;
    const std::string want = run(base, &st);
    REQUIRE(st == 0);
    REQUIRE(want.size() > 10);
    CHECK(run(base + "--model-draft " + model_path(name) + " --draft 5", &st) == want);
    CHECK(st == 0);
    CHECK(run(base + "--lookup 4", &st) == want);
    CHECK(st == 0);
  }
  int st = -1;
  const std::string q8 = "run -m " + model_path("TinyStories-656K-Q8_0.gguf") + " -p 'Once upon a time' -n 60 --temp 0 --ids ";
  const std::string want = run(q8, &st);
  CHECK(run(q8 + "-md " + model_path("TinyStories-656K-Q4_0.gguf") + " --draft 3", &st) == want);
  CHECK(st == 0);
}

TEST_CASE("fish run with a draft shifts the context as plain decoding does", "[e2e][spec]") {
  const std::string m = model_path("stories260K.gguf");
  // The shift count or the stop, from the stderr lines.
  auto how = [](const std::string& out) {
    std::smatch g;
    if (std::regex_search(out, g, std::regex("context shifted [0-9]+ times"))) return g.str();
    return std::string(out.find("is full; stopped") != std::string::npos ? "stopped" : "");
  };
  for (const char* shift : {"--keep 3", "--keep -1", "--no-context-shift"}) {
    INFO(shift);
    const std::string base = "run -m " + m + " -p 'Once upon a time' -c 40 -n 100 --temp 0 --ids " + shift + " ";
    int st = -1;
    const std::string want = run(base, &st), want_how = how(run(base, &st, true));
    REQUIRE(st == 0);
    CHECK(!want_how.empty());
    for (const std::string& spec : {"-md " + m + " --draft 6", std::string("--lookup 3")}) {
      INFO(spec);
      CHECK(run(base + spec, &st) == want);
      CHECK(st == 0);
      CHECK(how(run(base + spec, &st, true)) == want_how);
    }
  }
}

TEST_CASE("fish run --verbose reports the acceptance and the speed-up", "[e2e][spec]") {
  int st = -1;
  const std::string m = model_path("stories260K.gguf");
  std::string out = run("run -m " + m + " -n 30 --temp 0 -t 2 --verbose -md " + m + " --draft 4", &st, true);
  CHECK(st == 0);
  // The model as its own draft: every proposal kept, 5 tokens per forward.
  CHECK_THAT(out, Catch::Contains("up to 4 per step: 24 proposed, 24 accepted (100.0%); 5.00 tokens per target forward (6 forwards)"));
  CHECK(std::regex_search(out, std::regex("draft [0-9.]+ s \\(24 forwards\\), verify [0-9.]+ s")));
  CHECK(std::regex_search(out, std::regex("speed-up [0-9.]+x over one token per forward")));
  out = run("run -m " + m + " " + kPrompt + " -n 30 --temp 0 -t 2 --verbose --lookup 4", &st, true);
  CHECK(st == 0);
  std::smatch g;
  REQUIRE(std::regex_search(out, g, std::regex("n-gram lookup \\(3\\.\\.1\\), up to 4 per step: ([0-9]+) proposed, ([0-9]+) accepted")));
  CHECK(std::stoi(g[2]) > 0);
  // Sampling with a draft: speculative sampling, reproducible for a seed.
  const std::string sampled = "run -m " + m + " -n 40 --temp 0.8 --seed 5 -md " + m;
  const std::string a = run(sampled, &st);
  CHECK(st == 0);
  CHECK(run(sampled, &st) == a);
}

TEST_CASE("fish run refuses a draft it cannot use, in one line", "[e2e][spec]") {
  int st = -1;
  const std::string m = model_path("TinyStories-656K-Q8_0.gguf"), small = model_path("stories260K.gguf");
  std::string out = run("run -m " + m + " -n 4 -md " + small, &st, true);
  CHECK(st == 1);
  CHECK(out == "fish run: --model-draft " + small + " cannot draft for " + m +
                   ": n_vocab 2048 in the target, 512 in the draft\n");
  out = run("run -m " + m + " -n 4 -md /nonexistent/draft.gguf", &st, true);
  CHECK(st == 1);
  CHECK(out.find("/nonexistent/draft.gguf") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  const std::pair<const char*, const char*> bad[] = {
      {"--draft 4", "--draft N needs --model-draft M"},
      {"--lookup 4 -md M", "--lookup and --model-draft: choose one"},
      {"--lookup 0", "--lookup must be between 1 and 256"},
      {"-md M --draft 0", "--draft must be between 1 and 256"},
      {"-md M --draft-p-min 2", "--draft-p-min must be between 0 and 1"},
      {"--draft-p-min 0.5", "--draft-p-min needs --model-draft M"},
      {"-ngld 1", "-ngld needs --model-draft M"}};
  for (const auto& [args, msg] : bad) {
    INFO(args);
    out = run("run -m " + m + " -n 4 " + std::regex_replace(args, std::regex("\\bM\\b"), m), &st, true);
    CHECK(st == 2);
    CHECK(out.find(msg) != std::string::npos);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  }
}

TEST_CASE("fish bench --model-draft / --lookup: rows beside greedy decoding's, acceptance, verify cost", "[e2e][spec]") {
  int st = -1;
  const std::string m = model_path("stories260K.gguf");
  std::string out = run("bench -m " + m + " -p 0 -n 24 -r 1 -t 1 -md " + m + " --draft 3 --lookup 2", &st);
  REQUIRE(st == 0);
  CHECK(std::regex_search(out, std::regex("\\| tg24 \\| [0-9.]+ ± [0-9.]+ \\|\\n")));  // the plain row stays
  CHECK(std::regex_search(out, std::regex("\\| tg24 greedy \\| [0-9.]+ ± [0-9.]+ \\|\\n")));
  CHECK(std::regex_search(out, std::regex("\\| tg24 \\+draft3 \\| [0-9.]+ ± [0-9.]+ \\|\\n")));
  CHECK(std::regex_search(out, std::regex("\\| tg24 \\+lookup2 \\| [0-9.]+ ± [0-9.]+ \\|\\n")));
  // Its own draft: 24 tokens = 6 forwards of 3 kept + 1.
  CHECK(std::regex_search(out, std::regex("tg24 \\+draft3, CPU, 1 threads: [0-9.]+x tg24 greedy; 18 of 18 proposals "
                                          "accepted \\(100\\.0%\\), 4\\.00 tokens per target forward; the same text\\n")));
  CHECK(std::regex_search(out, std::regex("tg24 \\+lookup2, CPU, 1 threads: .*; the same text\\n")));
  CHECK(std::regex_search(out, std::regex("verify cost, CPU, 1 threads, after 1 tokens: one forward of 1 token [0-9.]+ ms, "
                                          "2: [0-9.]+ ms \\([0-9.]+x\\), 4: .*, 16: [0-9.]+ ms \\([0-9.]+x\\)\\n")));
  out = run("bench -m " + m + " -p 0 -n 8 -d 16 -r 1 -t 1 --lookup 2 --json", &st);
  REQUIRE(st == 0);
  CHECK(std::regex_search(out, std::regex("\"test\": \"tg8 \\+lookup2 @ d16\", .*\"spec\": \"lookup\", \"n_draft\": 2, "
                                          "\"proposed\": [0-9]+, \"accepted\": [0-9]+, \"target_forwards\": [0-9]+, "
                                          "\"same_text\": true\\}")));
  out = run("bench -m " + m + " -p 0 -n 8 --draft 2", &st, true);
  CHECK(st == 2);
  CHECK(out.find("--draft N needs --model-draft M") != std::string::npos);
  out = run("bench -m " + model_path("TinyStories-656K-Q8_0.gguf") + " -p 0 -n 8 -r 1 -md " + m, &st, true);
  CHECK(st == 1);
  CHECK(out.find("n_vocab 2048 in the target, 512 in the draft") != std::string::npos);
}
