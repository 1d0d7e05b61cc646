// The per-tensor type rules of the formats (type_mix.h): names, llama_ftype
// numbers, llama.cpp's "more bits" layers of Q4_K_M (hand-listed per depth), and
// the fall-backs for row lengths that do not fit a type's blocks.
#include <catch2/catch.hpp>

#include <set>

#include "convert/type_mix.h"
#include "quant/quant.h"

using namespace fish;
using namespace fish::convert;

TEST_CASE("type mix: format names and general.file_type numbers", "[convert]") {
  CHECK(parse_format("Q4_K_M") == Format::Q4_K_M);
  CHECK(parse_format("q4_k_m") == Format::Q4_K_M);
  CHECK(parse_format("f16") == Format::F16);
  CHECK_FALSE(parse_format("Q4_K"));
  CHECK_FALSE(parse_format(""));
  CHECK(file_type(Format::F32) == 0);
  CHECK(file_type(Format::F16) == 1);
  CHECK(file_type(Format::Q4_0) == 2);
  CHECK(file_type(Format::Q8_0) == 7);
  CHECK(file_type(Format::Q4_K_M) == 15);
  CHECK(file_type(Format::Q5_K_M) == 17);
  CHECK(file_type(Format::Q6_K) == 18);
  CHECK(parse_format("q5_k_m") == Format::Q5_K_M);
  CHECK(parse_format("Q6_K") == Format::Q6_K);
  CHECK_FALSE(parse_format("Q5_K"));
  CHECK(std::string(format_name(Format::Q8_0)) == "Q8_0");
}

TEST_CASE("type mix: layer numbers from tensor names", "[convert]") {
  CHECK(layer_of("blk.0.attn_v.weight") == 0);
  CHECK(layer_of("blk.27.ffn_down.weight") == 27);
  CHECK(layer_of("token_embd.weight") == -1);
  CHECK(layer_of("blk..x") == -1);
  CHECK(layer_of("blk.12") == -1);
  CHECK(layer_of("blk.9x.y") == -1);
}

TEST_CASE("type mix: the Q4_K_M more-bits layers for each model depth", "[convert]") {
  // i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2, worked out by hand.
  const std::pair<int, std::set<int>> cases[] = {
      {4, {2, 3}},
      {5, {2, 4}},
      {16, {0, 1, 4, 7, 10, 13, 14, 15}},
      {24, {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23}},
      {28, {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27}},
      {32, {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}},
  };
  for (auto& [n, want] : cases) {
    std::set<int> got;
    for (int i = 0; i < n; ++i)
      if (use_more_bits(i, n)) got.insert(i);
    INFO("n_layer " << n);
    CHECK(got == want);
  }
}

TEST_CASE("type mix: Q4_K_M tensor types", "[convert]") {
  auto type = [](const char* name, int64_t ne0, uint32_t n_dims, int n_layer, bool tied) {
    return choose_type(Format::Q4_K_M, name, ne0, n_dims, n_layer, tied, GgmlType::F32).type;
  };
  CHECK(type("output.weight", 2048, 2, 16, false) == GgmlType::Q6_K);
  CHECK(type("token_embd.weight", 2048, 2, 16, false) == GgmlType::Q4_K);
  CHECK(type("token_embd.weight", 2048, 2, 16, true) == GgmlType::Q6_K);  // tied: it is the output
  CHECK(type("blk.4.attn_v.weight", 2048, 2, 16, true) == GgmlType::Q6_K);
  CHECK(type("blk.5.attn_v.weight", 2048, 2, 16, true) == GgmlType::Q4_K);
  CHECK(type("blk.15.ffn_down.weight", 8192, 2, 16, true) == GgmlType::Q6_K);
  CHECK(type("blk.3.ffn_down.weight", 8192, 2, 16, true) == GgmlType::Q4_K);
  CHECK(type("blk.0.attn_k.weight", 2048, 2, 16, true) == GgmlType::Q4_K);
  CHECK(type("blk.0.ffn_up.weight", 2048, 2, 16, true) == GgmlType::Q4_K);
  CHECK(type("blk.0.attn_norm.weight", 2048, 1, 16, true) == GgmlType::F32);
  CHECK(type("rope_freqs.weight", 32, 1, 16, true) == GgmlType::F32);
  // Other formats: every matrix of the type, 1-D tensors keep theirs.
  CHECK(choose_type(Format::Q8_0, "output.weight", 64, 2, 5, false, GgmlType::F32).type == GgmlType::Q8_0);
  CHECK(choose_type(Format::Q4_0, "token_embd.weight", 64, 2, 5, true, GgmlType::F16).type == GgmlType::Q4_0);
  CHECK(choose_type(Format::F16, "blk.0.ffn_norm.weight", 64, 1, 5, true, GgmlType::F32).type == GgmlType::F32);
  CHECK(choose_type(Format::F16, "blk.0.ffn_up.weight", 64, 2, 5, true, GgmlType::F32).type == GgmlType::F16);
}

TEST_CASE("type mix: Q5_K_M and Q6_K tensor types, and 8 experts", "[convert]") {
  auto type = [](Format f, const char* name, int64_t ne0, uint32_t n_dims, bool tied, int n_expert = 0) {
    return choose_type(f, name, ne0, n_dims, 16, tied, GgmlType::F32, n_expert).type;
  };
  const Format M5 = Format::Q5_K_M, K6 = Format::Q6_K;
  CHECK(type(M5, "output.weight", 2048, 2, false) == GgmlType::Q6_K);
  CHECK(type(M5, "token_embd.weight", 2048, 2, false) == GgmlType::Q5_K);
  CHECK(type(M5, "token_embd.weight", 2048, 2, true) == GgmlType::Q6_K);
  CHECK(type(M5, "blk.4.attn_v.weight", 2048, 2, true) == GgmlType::Q6_K);  // a more-bits layer of 16
  CHECK(type(M5, "blk.5.attn_v.weight", 2048, 2, true) == GgmlType::Q5_K);
  CHECK(type(M5, "blk.15.ffn_down.weight", 8192, 2, true) == GgmlType::Q6_K);
  CHECK(type(M5, "blk.15.ffn_down_exps.weight", 8192, 3, true) == GgmlType::Q6_K);
  CHECK(type(M5, "blk.3.ffn_down.weight", 8192, 2, true) == GgmlType::Q5_K);
  CHECK(type(M5, "blk.0.ffn_gate_inp.weight", 2048, 2, true) == GgmlType::F32);  // the router keeps its type
  CHECK(type(M5, "blk.0.attn_norm.weight", 2048, 1, true) == GgmlType::F32);
  CHECK(type(K6, "blk.5.attn_q.weight", 2048, 2, true) == GgmlType::Q6_K);
  CHECK(type(K6, "token_embd.weight", 2048, 2, false) == GgmlType::Q6_K);
  // Mixtral (8 experts): k and v Q8_0 in every K-quant mix; attn_output Q5_K only lifts Q4_K_M.
  for (Format f : {Format::Q4_K_M, M5, K6}) {
    CHECK(type(f, "blk.5.attn_k.weight", 4096, 2, false, 8) == GgmlType::Q8_0);
    CHECK(type(f, "blk.5.attn_v.weight", 4096, 2, false, 8) == GgmlType::Q8_0);
  }
  CHECK(type(Format::Q4_K_M, "blk.5.attn_output.weight", 4096, 2, false, 8) == GgmlType::Q5_K);
  CHECK(type(M5, "blk.5.attn_output.weight", 4096, 2, false, 8) == GgmlType::Q5_K);
  CHECK(type(K6, "blk.5.attn_output.weight", 4096, 2, false, 8) == GgmlType::Q6_K);
  CHECK(type(M5, "blk.5.attn_k.weight", 4096, 2, false, 128) == GgmlType::Q5_K);  // Qwen3-30B-A3B: 128
  // Rows that fit no 256-block: Q5_K takes Q5_1 where fish can quantise it, else Q8_0 (not fewer bits).
  const GgmlType q5k_alt = can_quantize(GgmlType::Q5_1) ? GgmlType::Q5_1 : GgmlType::Q8_0;
  auto c = choose_type(M5, "blk.3.attn_q.weight", 896, 2, 24, true, GgmlType::F32);
  CHECK(c.type == q5k_alt);
  CHECK_THAT(c.note, Catch::Contains("896") && Catch::Contains("Q5_K"));
  CHECK(choose_type(K6, "blk.3.attn_q.weight", 896, 2, 24, true, GgmlType::F32).type == GgmlType::Q8_0);
  CHECK(choose_type(K6, "blk.0.ffn_down.weight", 172, 2, 5, false, GgmlType::F16).type == GgmlType::F16);
}

TEST_CASE("type mix: row lengths that do not fit fall back", "[convert]") {
  // Qwen2.5 0.5B: 896 = 3.5 * 256, so no K-quant fits: llama.cpp takes Q5_0 for Q4_K
  // (Q4_0 here while fish cannot quantise Q5_0) and Q8_0 for Q6_K.
  const GgmlType q4k_alt = can_quantize(GgmlType::Q5_0) ? GgmlType::Q5_0 : GgmlType::Q4_0;
  auto c = choose_type(Format::Q4_K_M, "blk.3.attn_q.weight", 896, 2, 24, true, GgmlType::F32);
  CHECK(c.type == q4k_alt);
  CHECK_THAT(c.note, Catch::Contains("896") && Catch::Contains("256"));
  c = choose_type(Format::Q4_K_M, "token_embd.weight", 896, 2, 24, true, GgmlType::F32);
  CHECK(c.type == GgmlType::Q8_0);
  c = choose_type(Format::Q4_K_M, "blk.3.ffn_down.weight", 4864, 2, 24, true, GgmlType::F32);
  CHECK(c.type == GgmlType::Q4_K);  // 4864 = 19 * 256 fits
  CHECK(c.note.empty());
  // stories260K's ffn_down rows are 172 long: no block type fits, the tensor keeps its type.
  c = choose_type(Format::Q8_0, "blk.0.ffn_down.weight", 172, 2, 5, false, GgmlType::F32);
  CHECK(c.type == GgmlType::F32);
  CHECK_THAT(c.note, Catch::Contains("row length 172") && Catch::Contains("kept as F32"));
  c = choose_type(Format::Q4_K_M, "blk.0.ffn_down.weight", 172, 2, 5, false, GgmlType::F16);
  CHECK(c.type == GgmlType::F16);
  // 64-wide rows (stories260K) in Q4_K_M: Q4_K's fall-back, Q8_0 for the output.
  CHECK(choose_type(Format::Q4_K_M, "blk.1.attn_q.weight", 64, 2, 5, false, GgmlType::F32).type == q4k_alt);
  CHECK(choose_type(Format::Q4_K_M, "output.weight", 64, 2, 5, false, GgmlType::F32).type == GgmlType::Q8_0);
}
