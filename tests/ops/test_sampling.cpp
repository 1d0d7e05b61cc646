// The sampler chain: greedy, truncations, determinism for a seed, penalty.
#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <vector>

#include "model/sampling.h"

using namespace fish;

TEST_CASE("sampler: greedy picks the first maximum", "[sampling]") {
  std::vector<float> l{0.1f, 2.0f, -1.0f, 2.0f, 1.5f};
  SamplerParams p;
  p.temp = 0;
  Sampler s(p);
  CHECK(s.sample(l.data(), 5) == 1);
  CHECK(argmax(l.data(), 5) == 1);
}

TEST_CASE("sampler: top-k 1 and tiny top-p are greedy, seeds reproduce", "[sampling]") {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[i] = float((i * 37) % 100) * 0.05f;
  const int best = argmax(l.data(), 100);
  SamplerParams p;
  p.temp = 1.0f;
  p.top_k = 1;
  p.seed = 5;
  Sampler a(p);
  for (int i = 0; i < 20; ++i) CHECK(a.sample(l.data(), 100) == best);
  p.top_k = 0;
  p.top_p = 1e-6f;
  Sampler b(p);
  for (int i = 0; i < 20; ++i) CHECK(b.sample(l.data(), 100) == best);

  p.top_p = 1.0f;
  p.min_p = 0;
  p.top_k = 0;
  Sampler c1(p), c2(p);
  std::set<int> seen;
  for (int i = 0; i < 200; ++i) {
    const int x = c1.sample(l.data(), 100);
    CHECK(x == c2.sample(l.data(), 100));
    seen.insert(x);
  }
  CHECK(seen.size() > 5);  // temperature 1 over 100 close logits really samples
}

TEST_CASE("sampler: min-p keeps only tokens within the ratio of the best", "[sampling]") {
  std::vector<float> l{5.0f, 4.9f, 0.0f, -3.0f};  // p(2)/p(0) ~ e^-5 < 0.1
  SamplerParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.1f;
  p.seed = 9;
  Sampler s(p);
  for (int i = 0; i < 200; ++i) {
    const int x = s.sample(l.data(), 4);
    CHECK((x == 0 || x == 1));
  }
}

TEST_CASE("sampler: repetition penalty demotes recent tokens", "[sampling]") {
  std::vector<float> l{3.0f, 2.9f, 0.0f};
  SamplerParams p;
  p.temp = 0;
  p.repeat_penalty = 1.5f;
  Sampler s(p);
  s.accept(0);
  CHECK(s.sample(l.data(), 3) == 1);  // 3.0 / 1.5 = 2.0 < 2.9
}

// OpenAI's presence and frequency penalties over the sampler's window (the
// last repeat_last_n accepted tokens): a token seen c times loses
// c * frequency + presence from its logit, after the repetition penalty; the
// distribution is the softmax of the penalised logits.
TEST_CASE("sampler: presence and frequency penalties lower seen tokens by count", "[sampling]") {
  const std::vector<float> l{2.0f, 1.9f, 1.0f, 0.5f};
  SamplerParams p;
  p.temp = 1, p.top_k = 0, p.top_p = 1, p.min_p = 0;
  p.presence_penalty = 0.5f, p.frequency_penalty = 0.3f;
  p.repeat_last_n = 3;
  Sampler s(p);
  for (int32_t t : {3, 0, 0, 2}) s.accept(t);  // the window keeps 0, 0, 2: token 3 has left it
  std::vector<TokenProb> d;
  s.distribution(l.data(), 4, d);
  // 0: 2.0 - (2 * 0.3 + 0.5) = 0.9; 1: 1.9; 2: 1.0 - (0.3 + 0.5) = 0.2; 3: 0.5.
  const double want_logit[4] = {0.9, 1.9, 0.2, 0.5};
  double z = 0;
  for (double w : want_logit) z += std::exp(w);
  REQUIRE(d.size() == 4);
  CHECK(d[0].id == 1);
  for (const TokenProb& tp : d) CHECK(tp.p == Approx(std::exp(want_logit[tp.id]) / z).epsilon(1e-5));
  // Greedy takes the penalised maximum; negative penalties favour seen tokens.
  p.temp = 0;
  Sampler g(p);
  for (int32_t t : {0, 0}) g.accept(t);
  CHECK(g.sample(l.data(), 4) == 1);  // 2.0 - 1.1 = 0.9 < 1.9
  p.presence_penalty = -1.0f, p.frequency_penalty = 0;
  Sampler n(p);
  n.accept(3);
  CHECK(n.sample(l.data(), 4) == 0);  // 0.5 + 1 = 1.5 < 2.0
  n.accept(1);
  CHECK(n.sample(l.data(), 4) == 1);  // 1.9 + 1 = 2.9
}
