// Speculative decoding's parts on a made-up model (fake_model.h): n-gram
// proposals, the acceptance rule's output distribution, greedy text identical
// to plain decoding, speculative sampling's text distribution, context shifts,
// and the errors.
#include <algorithm>
#include <cmath>
#include <map>
#include <catch2/catch.hpp>

#include "fake_model.h"
#include "model/sampling.h"
#include "spec/ngram_lookup.h"
#include "spec/spec_accept.h"
#include "spec/speculative.h"
#include "spec/vocab_match.h"

using fish::SamplerParams;
using fish::TokenProb;
using fish::spec::SpecDecoder;
using fish::spec::SpecParams;
using fish::test::FakeModel;

namespace {

std::vector<int32_t> propose(std::vector<int32_t> hist, int32_t n_min, int32_t n_max, int32_t max_n) {
  std::vector<int32_t> out{99};  // cleared by the call
  const int32_t n = fish::spec::ngram_propose(hist.data(), int32_t(hist.size()), n_min, n_max, max_n, out);
  REQUIRE(n == int32_t(out.size()));
  return out;
}

SamplerParams greedy_params() {
  SamplerParams p;
  p.temp = 0;
  return p;
}

// Plain decoding on the fake: one token per forward, the sampler's choice,
// and fish run's context shift (drop half of what follows the first n_keep).
std::vector<int32_t> plain(FakeModel& m, std::vector<int32_t> ctx, int n, const SamplerParams& sp, int32_t n_keep = 0) {
  fish::Sampler s(sp);
  for (int32_t t : ctx) s.accept(t);
  m.truncate(0);
  m.eval(ctx.data(), int32_t(ctx.size()), 0, false);
  std::vector<int32_t> out;
  while (int(out.size()) < n) {
    const int32_t tok = s.sample(m.logits(-1), m.n_vocab());
    s.accept(tok);
    out.push_back(tok);
    if (int(out.size()) == n) break;
    if (int32_t(ctx.size()) >= m.n_ctx()) {
      const int32_t n_discard = (int32_t(ctx.size()) - n_keep) / 2;
      ctx.erase(ctx.begin() + n_keep, ctx.begin() + n_keep + n_discard);
      m.truncate(n_keep);
      m.eval(ctx.data() + n_keep, int32_t(ctx.size()) - n_keep, n_keep, false);
    }
    ctx.push_back(tok);
    m.eval(&tok, 1, int32_t(ctx.size()) - 1, false);
  }
  return out;
}

// The same through the decoder, shifting as fish run does.
std::vector<int32_t> speculative(SpecDecoder& d, const std::vector<int32_t>& prompt, int n, int32_t n_ctx,
                                 int32_t n_keep = 0) {
  d.start(prompt.data(), int32_t(prompt.size()));
  std::vector<int32_t> out, step;
  while (int(out.size()) < n) {
    const int32_t n_tok = int32_t(d.tokens().size());
    if (n_tok > n_ctx) d.shift(n_keep, (n_tok - 1 - n_keep) / 2);
    d.step(n - int(out.size()), step);
    REQUIRE(!step.empty());
    out.insert(out.end(), step.begin(), step.end());
  }
  REQUIRE(int(out.size()) == n);
  return out;
}

}  // namespace

TEST_CASE("n-gram lookup proposes what followed the last tokens before", "[spec]") {
  CHECK(propose({1, 2, 3, 4, 1, 2, 3}, 1, 3, 4) == std::vector<int32_t>{4, 1, 2, 3});
  CHECK(propose({1, 2, 3, 4, 1, 2, 3}, 1, 3, 2) == std::vector<int32_t>{4, 1});
  // Past the end of the context the copy goes on with itself (period 2, then 1).
  CHECK(propose({5, 6, 5, 6}, 1, 3, 4) == std::vector<int32_t>{5, 6, 5, 6});
  CHECK(propose({7, 7, 7}, 1, 3, 3) == std::vector<int32_t>{7, 7, 7});
  // The latest occurrence wins; longer n-grams first.
  CHECK(propose({1, 2, 9, 1, 2, 8, 1, 2}, 1, 3, 2) == std::vector<int32_t>{8, 1});
  CHECK(propose({4, 1, 2, 9, 3, 2, 7, 4, 1, 2}, 1, 3, 1) == std::vector<int32_t>{9});  // [4 1 2], not [2]
  CHECK(propose({3, 2, 7, 1, 2}, 1, 3, 2) == std::vector<int32_t>{7, 1});            // only [2] matches
  CHECK(propose({3, 2, 7, 1, 2}, 2, 3, 2).empty());                                  // ... and 1-grams are off
  CHECK(propose({1, 2, 3}, 1, 3, 4).empty());
  CHECK(propose({1}, 1, 3, 4).empty());
  CHECK(propose({1, 1}, 1, 3, 0).empty());
  std::vector<int32_t> out{5};
  CHECK(fish::spec::ngram_propose(nullptr, 0, 1, 3, 4, out) == 0);
  CHECK(out.empty());
}

TEST_CASE("the acceptance rule's output is distributed as the target's", "[spec]") {
  const std::vector<TokenProb> p{{0, 0.5f}, {1, 0.3f}, {2, 0.2f}};
  struct Case {
    const char* what;
    std::vector<TokenProb> q;  // empty: the proposal is token 1 for certain
  };
  const std::vector<Case> cases{{"a draft distribution", {{0, 0.1f}, {1, 0.6f}, {2, 0.3f}}},
                                {"a draft that never proposes token 2", {{1, 0.7f}, {0, 0.3f}}},
                                {"a draft with a token the target rules out", {{3, 0.5f}, {0, 0.25f}, {1, 0.25f}}},
                                {"a certain proposal (n-gram lookup)", {}}};
  for (const Case& c : cases) {
    INFO(c.what);
    fish::spec::SpecSampling rule(42);
    const int n = 200000;
    std::map<int32_t, int> count;
    int kept = 0, kept_other = 0;
    for (int i = 0; i < n; ++i) {
      const int32_t x = c.q.empty() ? 1 : rule.draw(c.q);
      bool k = false;
      const int32_t y = rule.accept(p, c.q.empty() ? nullptr : &c.q, x, &k);
      kept_other += k != (y == x);  // a replacement is never the rejected token
      kept += k;
      ++count[y];
    }
    CHECK(kept_other == 0);
    CHECK(count.count(3) == 0);
    for (const TokenProb& t : p) {
      // 5 standard deviations of a frequency out of 200000 draws: <= 0.0056.
      const double f = double(count[t.id]) / n, sd = std::sqrt(double(t.p) * (1 - t.p) / n);
      CHECK(std::fabs(f - double(t.p)) < 5 * sd);
    }
    // Kept with probability sum_x min(p(x), q(x)) (p(1) for the certain proposal):
    // the most any rule that keeps p's distribution can keep.
    double overlap = 0;
    for (const TokenProb& t : p) {
      double qt = c.q.empty() ? (t.id == 1 ? 1.0 : 0.0) : 0.0;
      for (const TokenProb& u : c.q) qt += u.id == t.id ? double(u.p) : 0.0;
      overlap += std::min(double(t.p), qt);
    }
    CHECK(std::fabs(double(kept) / n - overlap) < 0.01);
  }
}

TEST_CASE("greedy speculative decoding gives plain decoding's tokens on a made-up model", "[spec]") {
  const std::vector<int32_t> prompt{1, 5, 9, 3};
  for (const float warp : {0.0f, 1.5f}) {
    for (const int32_t n_draft : {1, 3, 8}) {
      INFO("draft warp " << warp << ", n_draft " << n_draft);
      FakeModel ref(16, 256, 0), target(16, 256, 0), draft(16, 256, warp);
      const std::vector<int32_t> want = plain(ref, prompt, 60, greedy_params());
      SpecParams sp;
      sp.n_draft = n_draft;
      SpecDecoder d(target, &draft, sp, greedy_params());
      d.start(prompt.data(), int32_t(prompt.size()));
      const int64_t forwards0 = target.forwards;
      std::vector<int32_t> got, step;
      while (got.size() < 60) {
        d.step(int32_t(60 - got.size()), step);
        got.insert(got.end(), step.begin(), step.end());
        // The target holds the context but its last token; the draft a prefix of it.
        const std::vector<int32_t>& ctx = d.tokens();
        CHECK(target.kv == std::vector<int32_t>(ctx.begin(), ctx.end() - 1));
        REQUIRE(draft.kv.size() <= ctx.size());
        CHECK(std::equal(draft.kv.begin(), draft.kv.end(), ctx.begin()));
      }
      CHECK(got == want);
      const auto& st = d.stats();
      CHECK(target.forwards - forwards0 == st.steps);  // one verifying forward per step
      CHECK(st.generated == 60);
      CHECK(st.accepted + st.steps == 60);
      CHECK(st.proposed <= st.steps * n_draft);
      if (warp == 0) CHECK(st.accepted == st.proposed);  // the target as its own draft: all kept
      else CHECK((st.accepted > 0 && st.accepted < st.proposed));
    }
  }
}

TEST_CASE("greedy with a repetition penalty, n-gram lookup and draft_p_min keep plain decoding's tokens", "[spec]") {
  SamplerParams pen = greedy_params();
  pen.repeat_penalty = 1.4f;
  pen.repeat_last_n = 6;
  const std::vector<int32_t> prompt{1, 4, 7, 4, 7, 4};
  for (const SamplerParams& sp : {greedy_params(), pen}) {
    FakeModel ref(12, 256, 0);
    const std::vector<int32_t> want = plain(ref, prompt, 80, sp);
    {
      FakeModel target(12, 256, 0);
      SpecParams p;
      p.n_draft = 5;
      SpecDecoder d(target, nullptr, p, sp);
      CHECK(speculative(d, prompt, 80, 256) == want);
      // The fake's greedy text is periodic (its logits see two tokens): lookup finds it.
      CHECK(d.stats().accepted > 20);
      CHECK(d.stats().draft_forwards == 0);
    }
    {
      FakeModel target(12, 256, 0), draft(12, 256, 2.0f);
      SpecParams p;
      p.n_draft = 6;
      p.draft_p_min = 0.6f;
      SpecDecoder d(target, &draft, p, sp);
      CHECK(speculative(d, prompt, 80, 256) == want);
      CHECK(d.stats().proposed < d.stats().steps * 6);  // some drafts stopped early
    }
  }
}

TEST_CASE("context shifts through the decoder match plain decoding's", "[spec]") {
  const std::vector<int32_t> prompt{1, 3, 5, 7, 9, 2};
  for (const int32_t n_keep : {0, 3}) {
    FakeModel ref(14, 24, 0);
    const std::vector<int32_t> want = plain(ref, prompt, 90, greedy_params(), n_keep);
    FakeModel target(14, 24, 0), draft(14, 24, 1.0f), target2(14, 24, 0);
    SpecParams p;
    p.n_draft = 4;
    SpecDecoder with_draft(target, &draft, p, greedy_params());
    CHECK(speculative(with_draft, prompt, 90, 24, n_keep) == want);
    SpecDecoder lookup(target2, nullptr, p, greedy_params());
    CHECK(speculative(lookup, prompt, 90, 24, n_keep) == want);
  }
}

TEST_CASE("speculative sampling's text has the target sampler's distribution", "[spec]") {
  // Three tokens after the prompt over a 4-token vocabulary: 64 outcomes, each
  // counted over 30000 seeds against the product of the target sampler's
  // distributions (Sampler::distribution: temperature, top-k/p, min-p).
  SamplerParams sp;
  sp.temp = 0.9f;
  sp.top_p = 0.97f;
  sp.min_p = 0.02f;
  const std::vector<int32_t> prompt{1, 3, 0, 1, 3, 0, 1};
  FakeModel ref(4, 64, 0, 1.2f);
  std::map<std::vector<int32_t>, double> want;
  std::vector<TokenProb> dist[3];
  fish::Sampler s(sp);
  for (int32_t a = 0; a < 4; ++a)
    for (int32_t b = 0; b < 4; ++b)
      for (int32_t c = 0; c < 4; ++c) {
        std::vector<int32_t> ctx = prompt;
        double pr = 1;
        for (int32_t t : {a, b, c}) {
          const std::vector<float> l = ref.next_logits(ctx);
          std::vector<TokenProb> d;
          s.distribution(l.data(), 4, d);
          double pt = 0;
          for (const TokenProb& e : d) pt += e.id == t ? double(e.p) : 0.0;
          pr *= pt;
          ctx.push_back(t);
        }
        if (pr > 0) want[{a, b, c}] = pr;
      }
  struct Mode {
    const char* what;
    float warp;  // < 0: n-gram lookup
  };
  for (const Mode& mode : {Mode{"draft model", 1.3f}, Mode{"n-gram lookup", -1}}) {
    INFO(mode.what);
    const int n = 30000;
    std::map<std::vector<int32_t>, int> count;
    int64_t proposed = 0, accepted = 0;
    for (int i = 0; i < n; ++i) {
      FakeModel target(4, 64, 0, 1.2f), draft(4, 64, mode.warp, 1.2f);
      SamplerParams run = sp;
      run.seed = uint64_t(i) + 1;
      SpecParams p;
      p.n_draft = 3;
      SpecDecoder d(target, mode.warp < 0 ? nullptr : &draft, p, run);
      d.start(prompt.data(), int32_t(prompt.size()));
      std::vector<int32_t> got, step;
      while (got.size() < 3) {
        d.step(8, step);
        got.insert(got.end(), step.begin(), step.end());
      }
      got.resize(3);
      ++count[got];
      proposed += d.stats().proposed;
      accepted += d.stats().accepted;
    }
    CHECK(accepted > 0);
    CHECK(accepted < proposed);
    for (const auto& [seq, c] : count) CHECK(want.count(seq) == 1);  // nothing the sampler rules out
    for (const auto& [seq, pr] : want) {
      const double f = double(count[seq]) / n, sd = std::sqrt(pr * (1 - pr) / n);
      INFO("tokens " << seq[0] << " " << seq[1] << " " << seq[2] << ": " << f << " vs " << pr);
      CHECK(std::fabs(f - pr) < 5 * sd + 1e-4);
    }
  }
}

TEST_CASE("speculative decoding refuses what it cannot do, with a reason", "[spec]") {
  FakeModel target(12, 32, 0), other(13, 32, 0), renamed(12, 32, 0);
  renamed.text_prefix = "u";
  CHECK(fish::spec::vocab_mismatch(target, other) == "n_vocab 12 in the target, 13 in the draft");
  CHECK(fish::spec::vocab_mismatch(target, renamed) == "token 0 is 't0' in the target and 'u0' in the draft");
  CHECK(fish::spec::vocab_mismatch(target, target).empty());
  auto throws_with = [](auto&& fn, const std::string& part) {
    try {
      fn();
    } catch (const fish::Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(part) != std::string::npos);
      return;
    }
    FAIL("no error; expected one with '" << part << "'");
  };
  SpecParams p;
  throws_with([&] { SpecDecoder d(target, &other, p, greedy_params()); }, "vocabulary is not the target's: n_vocab 12");
  throws_with([&] { SpecDecoder d(target, &target, p, greedy_params()); }, "load the model a second time");
  p.n_draft = 0;
  throws_with([&] { SpecDecoder d(target, nullptr, p, greedy_params()); }, "n_draft must be >= 1");
  p.n_draft = 4;
  p.ngram_min = 3;
  p.ngram_max = 2;
  throws_with([&] { SpecDecoder d(target, nullptr, p, greedy_params()); }, "n-gram lengths 3..2");
  p = SpecParams{};
  SpecDecoder d(target, nullptr, p, greedy_params());
  std::vector<int32_t> out;
  throws_with([&] { d.step(4, out); }, "no context");
  const std::vector<int32_t> bad{1, 12};
  throws_with([&] { d.start(bad.data(), 2); }, "token 12 at 1 is outside the vocabulary (12)");
  throws_with([&] { d.start(bad.data(), 0); }, "at least one token");
  const std::vector<int32_t> long_prompt(33, 1);
  throws_with([&] { d.start(long_prompt.data(), 33); }, "do not fit the context (32)");
  const std::vector<int32_t> prompt{1, 2, 3};
  d.start(prompt.data(), 3);
  throws_with([&] { d.shift(1, 2); }, "cannot drop 2 tokens after 1 of a 3-token context");
  throws_with([&] { d.step(0, out); }, "room for at least one token");
  target.truncate(0);  // someone else used sequence 0
  throws_with([&] { d.step(4, out); }, "sequence 0 of the target changed outside it (it holds 0 positions, 2 expected)");
  d.start(prompt.data(), 3);  // starts afresh
  d.step(4, out);
  CHECK(!out.empty());
  const std::vector<int32_t> full(32, 1);
  d.start(full.data(), 32);
  d.step(4, out);  // the 32nd position: one token, no room for proposals
  CHECK(out.size() == 1);
  throws_with([&] { d.step(4, out); }, "the context is full (33 tokens, n_ctx 32); shift it first");
}
