// Packed embeddings (fish_embed_params.n_seq): several inputs at a time, each
// on a sequence of its own, their rows in the same forwards.
//   - inputs of mixed lengths (1 and 3 tokens, exactly 512 = a whole piece,
//     513 and 1030 = longer than one, a few dozen) packed on 2, 3, 8 and 12
//     sequences give each input's vector alone (n_seq 1) bit for bit on the
//     CPU, in every pooling mode, normalised or not: a row depends only on
//     its own sequence's KV (tests/seq asserts batched logits bit for bit) and
//     the pooled sum runs over its rows in position order as alone. On
//     stories260K (F32) and synth-tiny-Q4_K_M (int8 activations, repacked);
//   - the sequences used are left empty, those not used (outside
//     seq .. seq + n_seq - 1, or past the first n_inputs of them) keep their
//     KV, and sequence 0 goes on with the logits it had;
//   - (a failing forward: test_embed_batch_failure.cpp, through the engine);
//   - n_seq outside 1..fish_n_seq - seq is refused naming params.n_seq, and
//     changes nothing;
//   - a caller built before the field (struct_size without n_seq) is taken
//     as n_seq 1, the bytes past its struct never read;
//   - through the reference plugin's span (which holds several sequences)
//     packed vectors equal its one-at-a-time vectors bit for bit.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fish/fish.h"
#include "fish/fish_backends.h"
#include "test_model.h"
#include "test_paths.h"


namespace {

struct Model {
  fish_model* m = nullptr;
  int32_t dim = 0, n_vocab = 0;
  Model(const char* file, int n_seq, int n_ctx, int gpu_layers = 0) {
    fish_model_params p = fish_model_default_params();
    p.n_seq = n_seq;
    p.n_ctx = n_ctx;
    p.gpu_layers = gpu_layers;
    p.n_threads = 2;
    m = fish::test::require_model(file, p);
    dim = fish_n_embd(m);
    fish_model_info info{};
    info.struct_size = sizeof info;
    fish_model_get_info(m, &info);
    n_vocab = info.n_vocab;
  }
  ~Model() { fish_model_free(m); }
  int call(const std::vector<std::vector<int32_t>>& in, const fish_embed_params& p, std::vector<float>* out) {
    std::vector<const int32_t*> ptr;
    std::vector<int32_t> len;
    for (const auto& v : in) ptr.push_back(v.data()), len.push_back(int32_t(v.size()));
    out->assign(in.size() * size_t(dim), -7.0f);
    return fish_embed_tokens(m, ptr.data(), len.data(), int32_t(in.size()), &p, out->data());
  }
  std::vector<float> embed(const std::vector<std::vector<int32_t>>& in, int pooling, bool normalize, int seq,
                           int n_seq) {
    fish_embed_params p = fish_embed_default_params();
    p.pooling = pooling;
    p.normalize = normalize;
    p.seq = seq;
    p.n_seq = n_seq;
    std::vector<float> out;
    const int rc = call(in, p, &out);
    INFO(fish_last_error(m));
    REQUIRE(rc == 0);
    return out;
  }
  // Sequence s gets n tokens from position 0 (its last row's logits kept).
  void fill(int32_t s, const std::vector<int32_t>& tok) {
    std::vector<int32_t> pos, seq(tok.size(), s);
    for (size_t i = 0; i < tok.size(); ++i) pos.push_back(int32_t(i));
    fish_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = int32_t(tok.size()), b.token = tok.data(), b.pos = pos.data(), b.seq_id = seq.data();
    INFO(fish_last_error(m));
    REQUIRE(fish_decode(m, &b) == 0);
  }
};

// BOS, then n - 1 ids spread over the vocabulary (deterministic per seed).
std::vector<int32_t> stream(int32_t n, int32_t seed, int32_t n_vocab) {
  std::vector<int32_t> v{1};
  uint32_t x = 2654435761u * uint32_t(seed + 1);
  while (int32_t(v.size()) < n) {
    x = x * 1664525u + 1013904223u;
    v.push_back(3 + int32_t((x >> 8) % uint32_t(n_vocab - 3)));
  }
  return v;
}

// 1 and 3 tokens, a whole piece (512), one row past it (513), two pieces and
// more (1030), short ones between: the packing splits and joins at every kind
// of boundary.
std::vector<std::vector<int32_t>> mixed_inputs(int32_t n_vocab) {
  std::vector<std::vector<int32_t>> in;
  int32_t seed = 0;
  for (int32_t n : {1, 3, 600, 2, 17, 512, 40, 513, 5, 1030, 9, 1}) in.push_back(stream(n, seed++, n_vocab));
  return in;
}

bool same_bits(const float* a, const float* b, int32_t n) { return std::memcmp(a, b, size_t(n) * sizeof(float)) == 0; }

void check_packed_equals_alone(const char* file, const std::vector<int>& n_seqs, const std::vector<int>& poolings,
                               const std::vector<bool>& normalizes) {
  Model md(file, 12, 1100);
  const auto in = mixed_inputs(md.n_vocab);
  for (int pooling : poolings)
    for (bool normalize : normalizes) {
      std::vector<std::vector<float>> alone;
      for (const auto& v : in) alone.push_back(md.embed({v}, pooling, normalize, 0, 1));
      for (int n_seq : n_seqs) {
        const std::vector<float> packed = md.embed(in, pooling, normalize, 0, n_seq);
        for (size_t i = 0; i < in.size(); ++i) {
          INFO(file << ": pooling " << pooling << (normalize ? ", unit" : ", raw") << ", n_seq " << n_seq
                    << ", input " << i << " (" << in[i].size() << " tokens)");
          CHECK(same_bits(packed.data() + i * size_t(md.dim), alone[i].data(), md.dim));
        }
        for (int s = 0; s < n_seq; ++s) CHECK(fish_seq_len(md.m, s) == 0);
      }
    }
}

}  // namespace

TEST_CASE("embed batch: packed inputs of mixed lengths equal each alone, bit for bit (CPU)", "[embed]") {
  check_packed_equals_alone("stories260K.gguf", {2, 3, 8, 12},
                            {FISH_POOLING_MEAN, FISH_POOLING_LAST, FISH_POOLING_FIRST}, {true, false});
  check_packed_equals_alone("synth-tiny-Q4_K_M.gguf", {3, 8}, {FISH_POOLING_MEAN, FISH_POOLING_LAST}, {true});
}

TEST_CASE("embed batch: the sequences used are left empty, the others keep their KV and logits", "[embed]") {
  Model md("stories260K.gguf", 6, 256);
  const std::vector<int32_t> p0 = stream(20, 100, md.n_vocab), p4 = stream(9, 101, md.n_vocab),
                             p5 = stream(7, 102, md.n_vocab), old3 = stream(11, 103, md.n_vocab);
  md.fill(0, p0);
  const float* l = fish_get_logits_ith(md.m, int32_t(p0.size()) - 1);
  REQUIRE(l);
  const std::vector<float> before(l, l + md.n_vocab);
  md.fill(5, p5);
  md.fill(4, p4);
  md.fill(3, old3);
  std::vector<std::vector<int32_t>> in;
  for (int32_t i = 0; i < 7; ++i) in.push_back(stream(4 + 3 * i, i, md.n_vocab));
  // Sequences 1..3 for 7 inputs: 3 used (sequence 3's old positions dropped), 4 and 5 outside.
  md.embed(in, FISH_POOLING_MEAN, true, 1, 3);
  CHECK(fish_seq_len(md.m, 0) == int32_t(p0.size()));
  for (int s = 1; s <= 3; ++s) CHECK(fish_seq_len(md.m, s) == 0);
  CHECK(fish_seq_len(md.m, 4) == int32_t(p4.size()));
  CHECK(fish_seq_len(md.m, 5) == int32_t(p5.size()));
  // Two inputs on up to four sequences (1..4): only 1 and 2 are used; 4 keeps its positions.
  md.embed({in[0], in[1]}, FISH_POOLING_LAST, true, 1, 4);
  CHECK(fish_seq_len(md.m, 4) == int32_t(p4.size()));
  CHECK(fish_seq_len(md.m, 5) == int32_t(p5.size()));
  // Sequence 0 goes on: its last token again (position replaced) gives the logits it had.
  const int32_t last = p0.back(), at = int32_t(p0.size()) - 1;
  REQUIRE(fish_eval(md.m, &last, 1, at, 0) == 0);
  l = fish_get_logits(md.m, -1);
  REQUIRE(l);
  CHECK(std::memcmp(l, before.data(), before.size() * sizeof(float)) == 0);
}

TEST_CASE("embed batch: n_seq outside 1..n_seq - seq is refused naming the field, changing nothing", "[embed]") {
  Model md("stories260K.gguf", 4, 64);
  const std::vector<int32_t> held = stream(6, 7, md.n_vocab);
  md.fill(2, held);
  std::vector<float> out;
  for (auto [seq, n_seq] : {std::pair{0, 0}, {0, -1}, {0, 5}, {2, 3}, {3, 2}}) {
    fish_embed_params p = fish_embed_default_params();
    p.seq = seq;
    p.n_seq = n_seq;
    INFO("seq " << seq << ", n_seq " << n_seq);
    CHECK(md.call({{1, 5}, {1, 6}}, p, &out) != 0);
    const std::string e = fish_last_error(md.m);
    INFO(e);
    CHECK(e.find("params.n_seq " + std::to_string(n_seq)) != std::string::npos);
    CHECK(e.find("1.." + std::to_string(4 - seq)) != std::string::npos);
    CHECK(fish_seq_len(md.m, 2) == int32_t(held.size()));
    CHECK(out[0] == -7.0f);  // nothing written
  }
  // The largest allowed: every sequence from seq to the last.
  fish_embed_params p = fish_embed_default_params();
  p.seq = 1;
  p.n_seq = 3;
  CHECK(md.call({{1, 5}, {1, 6}, {1, 7}, {1, 8}}, p, &out) == 0);
  CHECK(fish_embed_default_params().n_seq == 1);
}

TEST_CASE("embed batch: a params struct from before n_seq is taken as n_seq 1", "[embed]") {
  Model md("stories260K.gguf", 2, 64);
  const std::vector<std::vector<int32_t>> in = {{1, 5, 9}, {1, 6}, {1, 7, 8, 9}};
  const std::vector<float> want = md.embed(in, FISH_POOLING_LAST, true, 1, 1);
  // The old layout, as a caller compiled against the old header passes it.
  struct OldParams {
    uint32_t struct_size;
    int32_t pooling, normalize, seq;
  };
  static_assert(sizeof(OldParams) == offsetof(fish_embed_params, n_seq));
  const OldParams old{sizeof(OldParams), FISH_POOLING_LAST, 1, 1};
  std::vector<const int32_t*> ptr;
  std::vector<int32_t> len;
  for (const auto& v : in) ptr.push_back(v.data()), len.push_back(int32_t(v.size()));
  std::vector<float> out(in.size() * size_t(md.dim));
  REQUIRE(fish_embed_tokens(md.m, ptr.data(), len.data(), 3, reinterpret_cast<const fish_embed_params*>(&old),
                            out.data()) == 0);
  CHECK(out == want);
  // The bytes past an old struct_size are not read: an n_seq there that would be refused is not.
  fish_embed_params p = fish_embed_default_params();
  p.struct_size = sizeof(OldParams);
  p.pooling = FISH_POOLING_LAST;
  p.seq = 1;
  p.n_seq = 99;
  std::vector<float> out2;
  INFO(fish_last_error(md.m));
  REQUIRE(md.call(in, p, &out2) == 0);
  CHECK(out2 == want);
  CHECK(fish_seq_len(md.m, 1) == 0);
}

#ifdef FISH_TEST_REFERENCE
TEST_CASE("embed batch: through the reference plugin's span packed vectors equal its one-at-a-time ones",
          "[embed][plugin]") {
  fish_backend_use_file(FISH_TEST_REFERENCE);
  {
    Model md("stories260K.gguf", 8, 1100, -1);
    fish_model_info info{};
    info.struct_size = sizeof info;
    fish_model_get_info(md.m, &info);
    INFO("backend " << info.backend << ", gpu_span " << info.gpu_span << ", gpu layers " << info.gpu_layers);
    CHECK(info.gpu_span == 1);
    const auto in = mixed_inputs(md.n_vocab);
    const std::vector<float> packed = md.embed(in, FISH_POOLING_MEAN, true, 0, 8);
    for (size_t i = 0; i < in.size(); ++i) {
      INFO("input " << i << " (" << in[i].size() << " tokens)");
      const std::vector<float> alone = md.embed({in[i]}, FISH_POOLING_MEAN, true, 0, 1);
      CHECK(same_bits(packed.data() + i * size_t(md.dim), alone.data(), md.dim));
    }
    for (int s = 0; s < 8; ++s) CHECK(fish_seq_len(md.m, s) == 0);
  }
  fish_backend_use_file(nullptr);
}
#endif
