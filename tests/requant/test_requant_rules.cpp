// The rules of online re-quantisation (model/requant.h, requant_auto.h): what
// each mode makes of each type, the fall-back for a backend without FQ3, the
// auto choice on made-up sizes, and the mix line in the spec's words.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "model/requant.h"
#include "model/requant_auto.h"

using namespace fish;

namespace {
constexpr GgmlType Q4K = GgmlType::Q4_K, Q5K = GgmlType::Q5_K, Q6K = GgmlType::Q6_K, FQ3 = GgmlType::FQ3;
}

TEST_CASE("requant: what each mode makes of each type", "[requant]") {
  struct Row {
    RequantMode m;
    GgmlType from;
    bool output;
    GgmlType to;
  };
  const Row rows[] = {
      // 1: every K-quant matrix of the layers to FQ3; the head never below Q4_K.
      {RequantMode::AllFq3, Q4K, false, FQ3}, {RequantMode::AllFq3, Q5K, false, FQ3},
      {RequantMode::AllFq3, Q6K, false, FQ3}, {RequantMode::AllFq3, Q6K, true, Q4K},
      {RequantMode::AllFq3, Q4K, true, Q4K},
      // 2: Q6_K / Q5_K to Q4_K only.
      {RequantMode::ToQ4K, Q4K, false, Q4K}, {RequantMode::ToQ4K, Q5K, false, Q4K},
      {RequantMode::ToQ4K, Q6K, false, Q4K}, {RequantMode::ToQ4K, Q6K, true, Q4K},
      // 3: Q4_K -> FQ3, Q6_K / Q5_K -> Q4_K.
      {RequantMode::Mixed, Q4K, false, FQ3}, {RequantMode::Mixed, Q5K, false, Q4K},
      {RequantMode::Mixed, Q6K, false, Q4K}, {RequantMode::Mixed, Q4K, true, Q4K},
      {RequantMode::Mixed, Q6K, true, Q4K},
      // Off, and auto before it is resolved: nothing.
      {RequantMode::Off, Q6K, false, Q6K}, {RequantMode::Auto, Q4K, false, Q4K},
      // Types no mode touches: no gain (Q2_K, Q3_K are as small), or not K-quants.
      {RequantMode::AllFq3, GgmlType::Q3_K, false, GgmlType::Q3_K}, {RequantMode::AllFq3, GgmlType::Q2_K, false, GgmlType::Q2_K},
      {RequantMode::AllFq3, GgmlType::Q8_0, false, GgmlType::Q8_0}, {RequantMode::Mixed, GgmlType::F16, true, GgmlType::F16},
  };
  for (const Row& r : rows) {
    INFO(requant_mode_name(r.m) << " " << ggml_type_name(r.from) << (r.output ? " output" : ""));
    CHECK(requant_target(r.m, r.from, r.output) == r.to);
  }
}

TEST_CASE("requant: a backend without FQ3 (or without Q4_K) gets what it takes", "[requant]") {
  const auto all = [](GgmlType) { return true; };
  const auto no_fq3 = [](GgmlType t) { return t != GgmlType::FQ3; };
  const auto neither = [](GgmlType t) { return t != GgmlType::FQ3 && t != GgmlType::Q4_K; };
  CHECK(requant_device_type(RequantMode::AllFq3, Q6K, false, all) == FQ3);
  CHECK(requant_device_type(RequantMode::AllFq3, Q6K, false, no_fq3) == Q4K);  // mode 1 becomes mode 2
  CHECK(requant_device_type(RequantMode::AllFq3, Q5K, false, no_fq3) == Q4K);
  CHECK(requant_device_type(RequantMode::AllFq3, Q4K, false, no_fq3) == Q4K);  // stays
  CHECK(requant_device_type(RequantMode::Mixed, Q4K, false, no_fq3) == Q4K);
  CHECK(requant_device_type(RequantMode::Mixed, Q6K, false, no_fq3) == Q4K);
  CHECK(requant_device_type(RequantMode::ToQ4K, Q6K, false, neither) == Q6K);
  CHECK(requant_device_type(RequantMode::AllFq3, Q6K, false, neither) == Q6K);
}

TEST_CASE("requant: the mix line in the spec's words", "[requant]") {
  RequantMix mix;
  CHECK(mix.str().empty());
  for (int i = 0; i < 133; ++i) mix.add(Q4K, FQ3, 16000000, 13000000);
  mix.add(Q4K, FQ3, 108000000, 11000000);  // totals 2236 MB and 1740 MB
  for (int i = 0; i < 21; ++i) mix.add(Q6K, Q4K, 43000000, 29476190);
  CHECK(mix.str() == "134 x Q4_K->FQ3 1740 MB (from 2236), 21 x Q6_K->Q4_K 619 MB (from 903)");
  CHECK(mix.count() == 155);
  RequantMix small;
  small.add(Q6K, Q4K, 1200000, 850000);
  small.add(Q4K, FQ3, 15500000, 12100000);
  CHECK(small.str() == "1 x Q6_K->Q4_K 0.85 MB (from 1.2), 1 x Q4_K->FQ3 12.1 MB (from 15.5)");
  // Expert stacks count as one tensor each, and the pair says how many were stacks.
  RequantMix moe;
  moe.add(Q4K, FQ3, 150000, 110000);
  moe.add(Q4K, FQ3, 300000, 230000, 8);
  moe.add(Q4K, FQ3, 300000, 230000, 8);
  moe.add(Q6K, Q4K, 590000, 300000, 1);
  CHECK(moe.str() == "3 x Q4_K->FQ3 0.57 MB (from 0.75; 2 expert stacks, 16 experts), "
                     "1 x Q6_K->Q4_K 0.30 MB (from 0.59; 1 expert stack, 1 expert)");
  CHECK(moe.count() == 4);
}

TEST_CASE("requant auto: the mildest mode that fits everything, else the most layers", "[requant][auto]") {
  // Four layers; each mode's layer and output bytes (made up, in the ratios
  // of a Q4_K_M file: 2 smaller than 0, 3 smaller than 2, 1 the smallest).
  auto cand = [](RequantMode m, uint64_t layer, uint64_t output) {
    return RequantCandidate{m, std::vector<uint64_t>(4, layer), output, {}};
  };
  const std::vector<RequantCandidate> c = {cand(RequantMode::Off, 100, 80), cand(RequantMode::ToQ4K, 90, 60),
                                           cand(RequantMode::Mixed, 75, 60), cand(RequantMode::AllFq3, 70, 60)};
  const auto no_reserve = [](int32_t) { return uint64_t(0); };
  struct Case {
    uint64_t budget;
    RequantMode mode;
    int32_t layers;
    bool output, everything;
  };
  const Case cases[] = {
      {1000, RequantMode::Off, 4, true, true},     // everything fits as it is
      {480, RequantMode::Off, 4, true, true},      // exactly
      {479, RequantMode::ToQ4K, 4, true, true},    // 420 with mode 2
      {420, RequantMode::ToQ4K, 4, true, true},
      {419, RequantMode::Mixed, 4, true, true},    // 360 with mode 3
      {359, RequantMode::AllFq3, 4, true, true},   // 340 with mode 1
      // Nothing fits all: 0 places 2 layers, 2, 3 and 1 place 3; 2 is the mildest of those.
      {339, RequantMode::ToQ4K, 3, true, false},
      // 0, 2 and 3 place 1 layer + output (180, 150, 135), 1 places 2 (60 + 2 x 70 = 200).
      {200, RequantMode::AllFq3, 2, true, false},
      // Every mode places 1 layer + output (0: 180, 2: 150, 3: 135, 1: 130): a tie goes to the mildest.
      {190, RequantMode::Off, 1, true, false},
      // Not even the output and one layer: the output alone, in the mildest mode that holds it.
      {70, RequantMode::ToQ4K, 0, true, false},
  };
  for (const Case& k : cases) {
    INFO("budget " << k.budget);
    const RequantAutoChoice r = choose_requant_mode(c, k.budget, no_reserve);
    CHECK(r.mode == k.mode);
    CHECK(r.layers == k.layers);
    CHECK(r.output == k.output);
    CHECK(r.everything == k.everything);
  }
  // The span's reserve counts: with 40 bytes per layer of span, 480 no longer
  // holds mode 0's four layers (480 + 160).
  const auto reserve = [](int32_t k) { return uint64_t(40) * uint64_t(k); };
  CHECK(choose_requant_mode(c, 640, reserve).mode == RequantMode::Off);
  CHECK(choose_requant_mode(c, 639, reserve).mode == RequantMode::ToQ4K);
  // The output goes first and is dropped when even a one-layer span's reserve
  // would not fit beside it (as placement does); the layers still place.
  const RequantAutoChoice tight = simulate_placement(cand(RequantMode::Off, 10, 100), 105,
                                                     [](int32_t k) { return uint64_t(k ? 10 : 0); });
  CHECK_FALSE(tight.output);
  CHECK(tight.layers == 4);  // 4 x 10 + 40 reserve = 80 <= 105
}

TEST_CASE("requant auto: MoE expert stacks count, and more layers' experts on the device win", "[requant][auto]") {
  // Four MoE layers: 20 bytes of attention + router each, and expert stacks
  // of 100 (mode 0), 80 (2), 70 (3) or 60 (1); output 10; no span reserve.
  auto cand = [](RequantMode m, uint64_t experts, uint64_t host_first = 0) {
    RequantCandidate c{m, std::vector<uint64_t>(4, 20), 10, {}};
    c.expert_bytes.assign(4, experts);
    for (uint64_t i = 0; i < host_first; ++i) c.expert_bytes[size_t(3 - i)] = RequantCandidate::kHostExperts;
    return c;
  };
  const auto no_reserve = [](int32_t) { return uint64_t(0); };
  const std::vector<RequantCandidate> c = {cand(RequantMode::Off, 100), cand(RequantMode::ToQ4K, 80),
                                           cand(RequantMode::Mixed, 70), cand(RequantMode::AllFq3, 60)};
  // Dense bytes alone (90) fit every mode: the experts decide.
  struct Case {
    uint64_t budget;
    RequantMode mode;
    int32_t layers, expert_layers;
    bool everything;
  };
  const Case cases[] = {
      {490, RequantMode::Off, 4, 4, true},     // 10 + 4 x 120
      {489, RequantMode::ToQ4K, 4, 4, true},   // 10 + 4 x 100 = 410
      {409, RequantMode::Mixed, 4, 4, true},   // 370
      {369, RequantMode::AllFq3, 4, 4, true},  // 330
      // None holds every layer's experts: 0 places 4 layers, 2 with experts
      // (the third's would pass 329); 2 places 3, all with experts (the
      // fourth's attention no longer fits); 3 and 1 place 4, 3 with experts:
      // 3, the milder of the two.
      {329, RequantMode::Mixed, 4, 3, false},
      // 2 and 3 place 4 layers, 2 with experts; 1 places 3, all with their
      // experts (250): more layers' experts on the device beats more layers.
      {260, RequantMode::AllFq3, 3, 3, false},
  };
  for (const Case& k : cases) {
    INFO("budget " << k.budget);
    const RequantAutoChoice r = choose_requant_mode(c, k.budget, no_reserve);
    CHECK(r.mode == k.mode);
    CHECK(r.layers == k.layers);
    CHECK(r.expert_layers == k.expert_layers);
    CHECK(r.everything == k.everything);
  }
  // Once a layer's experts do not fit, no earlier layer's go to the device
  // (placement keeps the first layers' on the host), even where they would fit.
  RequantCandidate uneven = cand(RequantMode::Off, 10);
  uneven.expert_bytes = {10, 500, 10, 10};
  const RequantAutoChoice u = simulate_placement(uneven, 200, no_reserve);
  CHECK(u.layers == 4);
  CHECK(u.expert_layers == 1);
  // Mode 0 fails the first layer's experts and places all 4 layers without
  // any (90); mode 1 places 2 layers, both with their experts (130): mode 1.
  const std::vector<RequantCandidate> c2 = {cand(RequantMode::Off, 200), cand(RequantMode::AllFq3, 40)};
  const RequantAutoChoice r2 = choose_requant_mode(c2, 130, no_reserve);
  CHECK(r2.mode == RequantMode::AllFq3);
  CHECK(r2.expert_layers == 2);
  CHECK(r2.layers == 2);
  // --n-cpu-moe: the first layers' (last in placement order) experts stay on
  // the host; everything then means the others' experts.
  const RequantAutoChoice h = simulate_placement(cand(RequantMode::Off, 100, 2), 1000, no_reserve);
  CHECK(h.expert_layers == 2);
  CHECK(h.everything);
}
