// Greedy generation against the reference ids (models/SOURCES.md) and the
// reference continuations (reference/greedy.tsv, made by llama.cpp).
#include <catch2/catch.hpp>
#include <algorithm>
#include <sstream>

#include "e2e_util.h"
#include "test_paths.h"

using namespace fish::test;

namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> v;
  std::stringstream ss(s);
  int32_t x;
  while (ss >> x) v.push_back(x);
  return v;
}

}  // namespace

TEST_CASE("stories260K: greedy from BOS reproduces the reference ids", "[e2e][greedy]") {
  ModelHandle h(model_path("stories260K.gguf"));
  const auto want = parse_ids(
      "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 "
      "282 295 433 426 385 328 432 358 394 261 370 432 352 266 268 388 426 338 391 266 267");
  const auto got = greedy(h.m, {1}, 48);
  CHECK(got == want);
  CHECK(detokenize_pieces(h.m, got).rfind(" Once upon a time, there was a little girl named Lily.", 0) == 0);
}

TEST_CASE("TinyStories-656K-Q8_0: greedy from BOS reproduces the reference ids", "[e2e][greedy]") {
  ModelHandle h(model_path("TinyStories-656K-Q8_0.gguf"));
  const auto want = parse_ids(
      "147 201 282 215 286 598 1662 356 499 826 1363 1145 1652 615 242 1482 951 628 499 826 872 921 318 385 628 499 "
      "826 617 242 198 1047 425 1939 122 1924 1171 94 303 328 229 521 776 115 1139 312 447 1456 319");
  const auto got = greedy(h.m, {1}, 48);
  CHECK(got == want);
}

TEST_CASE("llama-2-tiny-random (F16): greedy from BOS reproduces the reference ids", "[e2e][greedy]") {
  ModelHandle h(model_path("llama-2-tiny-random.gguf"));
  const auto want = parse_ids("31102 18247 4847 634 20459 5601 29710 4660 29509 31364 28253 12321 12681 14340 1189 30070");
  CHECK(greedy(h.m, {1}, 16) == want);
}

namespace {

// Follows the reference text token by token from `pos` (KV holds the prefix and
// `logits` are the current step's). Every step's token must be our top-1, or a
// token within kNearTie logits of it (a "flip": int8 activation rounding
// differs in the last bit between implementations, so near-ties can go either
// way), at most kMaxFlips times; the token's piece must continue the reference
// text. Different segmentations of the same text are tried (depth first), so a
// near-tie between two tokenizations of the same words is not mistaken for a
// divergence. True when some such path reproduces the whole text.
constexpr float kNearTie = 0.1f;
constexpr int kMaxFlips = 3;  // Q4_0 "The sun was" needs 3 (margins < 0.1)

bool follow(fish_model* m, int32_t n_vocab, const std::string& want, size_t at, int32_t pos, int steps_left,
            int flips, std::vector<float> logits, std::string* why) {
  if (at == want.size()) return true;
  if (steps_left == 0) {
    *why = "ran out of tokens with \"" + want.substr(at) + "\" left";
    return false;
  }
  int32_t top = 0;
  for (int32_t k = 1; k < n_vocab; ++k)
    if (logits[size_t(k)] > logits[size_t(top)]) top = k;
  std::vector<int32_t> cands;
  for (int32_t k = 0; k < n_vocab; ++k) {
    if (logits[size_t(top)] - logits[size_t(k)] > kNearTie) continue;
    const std::string pc = detokenize_pieces(m, {k});
    if (!pc.empty() && want.compare(at, pc.size(), pc) == 0) cands.push_back(k);
  }
  std::sort(cands.begin(), cands.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  if (cands.empty())
    *why = "at \"" + want.substr(at, 24) + "\" our top-1 is '" + detokenize_pieces(m, {top}) +
           "' and no token continuing the reference is within " + std::to_string(kNearTie) + " logits of it";
  for (int32_t k : cands) {
    const int f = flips + (k != top);
    if (f > kMaxFlips) {
      *why = "more than " + std::to_string(kMaxFlips) + " near-tie flips";
      continue;
    }
    REQUIRE(fish_kv_truncate(m, pos) == 0);
    REQUIRE(fish_eval(m, &k, 1, pos, 0) == 0);
    const float* lg = fish_get_logits(m, -1);
    if (follow(m, n_vocab, want, at + detokenize_pieces(m, {k}).size(), pos + 1, steps_left - 1, f,
               std::vector<float>(lg, lg + n_vocab), why))
      return true;
  }
  return false;
}

}  // namespace

// reference/greedy.tsv: model, prompt, n, continuation (llama.cpp, greedy,
// at most n tokens). F32 weights must reproduce the text exactly; quantised
// weights must reproduce it up to near-tie flips (see follow()).
TEST_CASE("greedy continuations match reference/greedy.tsv", "[e2e][greedy]") {
  for (const auto& row : read_tsv(shared_path("reference/greedy.tsv"))) {
    REQUIRE(row.size() == 4);
    const std::string model = row[0], prompt = json_unquote(row[1]);
    const int n = std::stoi(row[2]);
    std::string want = json_unquote(row[3]);
    // The TSV's continuation ends with the tool's "\n\n" separator.
    if (want.size() >= 2 && want.compare(want.size() - 2, 2, "\n\n") == 0) want.resize(want.size() - 2);
    ModelHandle h(model_path(model));
    const fish_model_info info = h.info();
    const auto prompt_ids = tokenize(h.m, prompt, true);
    if (model.find("Q") == std::string::npos) {
      const std::string got = detokenize_pieces(h.m, greedy(h.m, prompt_ids, n));
      INFO(model << " prompt " << row[1] << "\n got: " << got << "\nwant: " << want);
      CHECK(got == want);
      continue;
    }
    REQUIRE(fish_eval(h.m, prompt_ids.data(), int32_t(prompt_ids.size()), 0, 0) == 0);
    const float* lg = fish_get_logits(h.m, -1);
    std::string why;
    const bool ok = follow(h.m, info.n_vocab, want, 0, int32_t(prompt_ids.size()), n, 0,
                           std::vector<float>(lg, lg + info.n_vocab), &why);
    INFO(model << " prompt " << row[1] << ": " << why);
    CHECK(ok);
  }
}
