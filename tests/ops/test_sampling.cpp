// The sampler chain: greedy, truncations, determinism for a seed, penalty.
#include <catch2/catch.hpp>
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
