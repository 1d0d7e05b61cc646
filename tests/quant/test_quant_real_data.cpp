// Real GGUF tensors made by llama.cpp (read in place from the shared models):
//  - TinyStories-656K in Q8_0 and the same weights re-quantised by
//    llama-quantize to Q4_0: every matrix of the two files agrees within Q4_0's
//    error bound. Q4_0 stores d = max/−8 and levels min(15, trunc(x/d + 8.5)):
//    the error of a value is at most |d|/2, or |d| for the one level lost to the
//    cap at 15, plus the f16 rounding of d (8·2^-11·|d|). So per block:
//    |x4 − x8| <= 1.004·|d4| + 1e-6, and over a tensor the relative RMS
//    difference is that of 4-bit rounding (< 12%).
//  - synth-tiny-Q4_K_M: its Q4_K and Q6_K tensors decode to finite values with
//    the stds the generator used, and re-quantising the decoded values to the
//    same type reproduces them (they already lie on a grid of that format).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/fp16.h"
#include "gguf/gguf_file.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant_test_util.h"
#include "test_paths.h"

using namespace fish;

namespace {

std::vector<float> decode_tensor(const gguf::TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  for (int64_t r = 0; r < t.n_rows(); ++r)
    dequant_row(t.type, t.data + uint64_t(r) * t.row_bytes(), out.data() + size_t(r * t.ne[0]), t.ne[0]);
  return out;
}

}  // namespace

TEST_CASE("TinyStories-656K: Q8_0 and llama.cpp's Q4_0 of it agree within Q4_0's bound", "[quant][real]") {
  const auto f8 = gguf::File::open(test::model_path("TinyStories-656K-Q8_0.gguf"));
  const auto f4 = gguf::File::open(test::model_path("TinyStories-656K-Q4_0.gguf"));
  int compared = 0;
  for (const auto& t8 : f8->tensors()) {
    const gguf::TensorInfo* t4 = f4->tensor(t8.name);
    REQUIRE(t4 != nullptr);
    REQUIRE(t4->n_elements() == t8.n_elements());
    const auto x8 = decode_tensor(t8);
    const auto x4 = decode_tensor(*t4);
    INFO(t8.name << " " << ggml_type_name(t8.type) << " -> " << ggml_type_name(t4->type));
    if (t4->type == t8.type) {  // kept as is (norms in F32, token_embd in Q8_0)
      CHECK(x4 == x8);
      continue;
    }
    REQUIRE(t8.type == GgmlType::Q8_0);
    REQUIRE(t4->type == GgmlType::Q4_0);
    const auto* blocks = reinterpret_cast<const BlockQ4_0*>(t4->data);
    size_t worst = 0;
    double worst_ratio = 0;
    for (size_t i = 0; i < x8.size(); ++i) {
      const double d4 = std::fabs(fp16_to_fp32(blocks[i / 32].d));
      const double diff = std::fabs(double(x4[i]) - double(x8[i]));
      const double ratio = diff / (1.004 * d4 + 1e-6);
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst = i;
      }
    }
    INFO("worst element " << worst << ": q8 " << x8[worst] << ", q4 " << x4[worst]);
    CHECK(worst_ratio <= 1.0);
    const double rel = test::rel_rms(x8.data(), x4.data(), x8.size());
    CHECK(rel < 0.12);
    CHECK(rel > 0.02);  // they are really different encodings
    ++compared;
  }
  CHECK(compared == 14);  // every matrix except token_embd (kept in Q8_0)
}

TEST_CASE("TinyStories-656K: fish's Q4_0 of the Q8_0 weights is llama.cpp's, byte for byte", "[quant][real]") {
  // llama-quantize decoded the Q8_0 blocks to f32 and ran ggml's reference Q4_0
  // quantiser; fish's quantize_row(Q4_0) follows the same rounding rules, so
  // every block must come out identical.
  const auto f8 = gguf::File::open(test::model_path("TinyStories-656K-Q8_0.gguf"));
  const auto f4 = gguf::File::open(test::model_path("TinyStories-656K-Q4_0.gguf"));
  int tensors = 0;
  for (const auto& t8 : f8->tensors()) {
    const gguf::TensorInfo* t4 = f4->tensor(t8.name);
    if (t4->type != GgmlType::Q4_0) continue;
    const auto x8 = decode_tensor(t8);
    std::vector<uint8_t> ours(t4->nbytes);
    quantize_row(GgmlType::Q4_0, x8.data(), ours.data(), int64_t(x8.size()));
    size_t differing = 0;
    for (size_t b = 0; b < ours.size() / sizeof(BlockQ4_0); ++b)
      differing += std::memcmp(ours.data() + b * sizeof(BlockQ4_0), t4->data + b * sizeof(BlockQ4_0), sizeof(BlockQ4_0)) != 0;
    INFO(t8.name << ": " << differing << " differing blocks");
    CHECK(differing == 0);
    ++tensors;
  }
  CHECK(tensors == 14);
}

TEST_CASE("synth-tiny-Q4_K_M: llama.cpp's Q4_K / Q6_K tensors decode sanely and are fixed points", "[quant][real]") {
  const auto f = gguf::File::open(test::model_path("synth-tiny-Q4_K_M.gguf"));
  std::map<GgmlType, int> seen;
  for (const auto& t : f->tensors()) {
    if (t.type != GgmlType::Q4_K && t.type != GgmlType::Q6_K) {
      CHECK(t.type == GgmlType::F32);
      continue;
    }
    ++seen[t.type];
    const auto x = decode_tensor(t);
    double sum = 0, sum2 = 0;
    for (float v : x) {
      REQUIRE(std::isfinite(v));
      sum += v;
      sum2 += double(v) * v;
    }
    const double n = double(x.size());
    const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
    // The generator's stds: 0.1 for output, 0.02 for the matrices that read the
    // residual stream, 0.02/sqrt(2·4 layers) for attn_output and ffn_down.
    double want = 0.02;
    if (t.name == "output.weight") want = 0.1;
    if (t.name.find("attn_output") != std::string::npos || t.name.find("ffn_down") != std::string::npos)
      want = 0.02 / std::sqrt(8.0);
    INFO(t.name << " " << ggml_type_name(t.type) << ": mean " << mean << ", std " << sd);
    CHECK(std::fabs(sd - want) < 0.03 * want);
    CHECK(std::fabs(mean) < 0.05 * sd);

    // Fixed point: re-quantise the decoded values to the same type.
    const auto y = test::round_trip(t.type, x);
    const double err = test::rel_rms(x.data(), y.data(), x.size());
    // measured: 0 for 20 of the 29 tensors, at most 0.07%
    INFO("re-quantisation relative RMS change " << err * 100 << " %");
    CHECK(err < 0.003);
  }
  CHECK(seen[GgmlType::Q4_K] > 0);
  CHECK(seen[GgmlType::Q6_K] > 0);
}
