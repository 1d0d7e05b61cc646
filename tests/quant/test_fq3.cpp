// FQ3, fish's 3-bit device layout (quant/blocks.h BlockFQ3): the decoder
// against ../shared/reference/fq3 (64 blocks made from the spec's text alone,
// read in place: every value bit for bit, the NaN block without a trap), the
// quantiser's error on trained and synthetic weights within stated bounds, the
// reference dot product against the decoded values, and the geometry the rest
// of the engine sees.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/quant_kernels.h"
#include "quant_test_util.h"
#include "test_paths.h"

using namespace fish;

namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Every 2-D tensor of `type` in a model file, decoded and laid end to end.
std::vector<float> matrices_of(const std::string& model, GgmlType type) {
  auto file = gguf::File::open(test::model_path(model));
  std::vector<float> out;
  for (const auto& t : file->tensors()) {
    if (t.n_dims != 2 || t.type != type) continue;
    const size_t at = out.size();
    out.resize(at + size_t(t.n_elements()));
    dequant_row(t.type, t.data, out.data() + at, t.n_elements());
  }
  return out;
}

// The trained weights of TinyStories-656K (Q8_0 in the file), end to end and
// cut to whole 256-blocks (its rows are 128 or 384 long: the K formats see
// them as one long row), then put through `file_type` as a K-quant model file
// would hold them.
std::vector<float> trained_as(GgmlType file_type) {
  std::vector<float> x = matrices_of("TinyStories-656K-Q8_0.gguf", GgmlType::Q8_0);
  x.resize(x.size() / 256 * 256);
  return test::round_trip(file_type, x);
}

// requantize_row then dequant_row: the error of a device copy.
double requant_error(GgmlType to, const std::vector<float>& x) {
  std::vector<uint8_t> q(test::row_bytes(to, int64_t(x.size())));
  requantize_row(to, x.data(), q.data(), int64_t(x.size()));
  std::vector<float> y(x.size());
  dequant_row(to, q.data(), y.data(), int64_t(x.size()));
  return test::rel_rms(x.data(), y.data(), x.size());
}

}  // namespace

TEST_CASE("FQ3: geometry, and never a GGUF type", "[quant][fq3]") {
  const auto info = ggml_type_info(GgmlType::FQ3);
  REQUIRE(info);
  CHECK(std::string(info->name) == "FQ3");
  CHECK((info->block_size == 256 && info->type_size == 112 && info->computable));
  CHECK(uint32_t(GgmlType::FQ3) == 1000);
  CHECK(*ggml_row_bytes(uint32_t(GgmlType::FQ3), 4096) == 16 * 112);
  CHECK_FALSE(ggml_type_in_gguf(GgmlType::FQ3));
  CHECK(ggml_type_in_gguf(GgmlType::Q4_K));
  CHECK_FALSE(ggml_type_in_gguf(99u));
  CHECK((can_dequantize(GgmlType::FQ3) && can_quantize(GgmlType::FQ3)));
  CHECK((can_requantize_to(GgmlType::FQ3) && can_requantize_to(GgmlType::Q4_K)));
  CHECK_FALSE(can_requantize_to(GgmlType::Q6_K));
  CHECK(vec_dot_type(GgmlType::FQ3) == GgmlType::Q8_K);
}

TEST_CASE("FQ3: the reference vectors decode bit for bit", "[quant][fq3]") {
  const auto blocks = read_all(test::shared_path("reference/fq3/fq3_blocks.bin"));
  const auto raw = read_all(test::shared_path("reference/fq3/fq3_values.f32"));
  REQUIRE(blocks.size() == 64 * 112);
  REQUIRE(raw.size() == 64 * 256 * 4);
  std::vector<float> want(64 * 256), got(64 * 256, -1.0f);
  std::memcpy(want.data(), raw.data(), raw.size());
  dequant_row(GgmlType::FQ3, blocks.data(), got.data(), 64 * 256);
  int differ = 0, nan_both = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      nan_both += std::isnan(want[i]) && std::isnan(got[i]);
      differ += !(std::isnan(want[i]) && std::isnan(got[i]));
    } else {
      differ += bits(want[i]) != bits(got[i]);
    }
  }
  CHECK(differ == 0);
  CHECK(nan_both == 256);  // block 1 (d = dmin = NaN) only, every value NaN
  for (int i = 0; i < 256; ++i) CHECK(got[size_t(i)] == 0.0f);  // block 0: all zero
  // Block 2 by hand (d = 1, dmin = 0.5, scales 1, mins 2: every value q - 1).
  const auto codes = [&](int b, int g) {
    uint8_t q[32];
    qk::fq3_group_codes(blocks.data() + size_t(b) * 112 + 16 + size_t(12 * g), q);
    return std::vector<uint8_t>(q, q + 32);
  };
  for (int g = 0; g < 8; ++g)
    for (int l = 0; l < 32; ++l) CHECK(got[size_t(512 + 32 * g + l)] == float(codes(2, g)[size_t(l)]) - 1.0f);
  // The code scatter is a bijection: packing the codes gives back the words.
  int repacked_differ = 0;
  for (int b = 0; b < 64; ++b) {
    for (int g = 0; g < 8; ++g) {
      const auto q = codes(b, g);
      uint8_t words[12];
      qk::fq3_pack_group(q.data(), words);
      repacked_differ += std::memcmp(words, blocks.data() + size_t(b) * 112 + 16 + size_t(12 * g), 12) != 0;
    }
  }
  CHECK(repacked_differ == 0);
}

TEST_CASE("FQ3: the bit order of the codes, one value at a time", "[quant][fq3]") {
  // Value 4s + t of a group: low bits at 2(s & 3) + 8t of A (s < 4) or B, high
  // bit at s + 8t of C. Setting one code to 7 sets exactly those three bits.
  for (int v = 0; v < 32; ++v) {
    uint8_t q[32] = {};
    q[v] = 7;
    uint8_t words[12];
    qk::fq3_pack_group(q, words);
    uint32_t A, B, C;
    std::memcpy(&A, words, 4);
    std::memcpy(&B, words + 4, 4);
    std::memcpy(&C, words + 8, 4);
    const int s = v / 4, t = v % 4;
    const uint32_t lo = 3u << (2 * (s & 3) + 8 * t);
    CHECK(A == (s < 4 ? lo : 0u));
    CHECK(B == (s < 4 ? 0u : lo));
    CHECK(C == 1u << (s + 8 * t));
  }
}

TEST_CASE("FQ3 and the re-quantising Q4_K: error within the stated bounds", "[quant][fq3]") {
  // The spec measured Q4_K -> FQ3 at 13.9-14.6% relative RMS and Q6_K -> Q4_K
  // at 7.3-7.5% on real 1B weights. Here (fish's fit, kRequantFQ3 /
  // kRequantQ4K) on TinyStories' trained weights: 13.67% and 7.11%; on
  // synth-tiny's own Q4_K / Q6_K matrices: 13.70% and 7.12%. Bounds: the
  // spec's lower ends.
  const double fq3_trained = requant_error(GgmlType::FQ3, trained_as(GgmlType::Q4_K));
  const double q4k_trained = requant_error(GgmlType::Q4_K, trained_as(GgmlType::Q6_K));
  const double fq3_synth = requant_error(GgmlType::FQ3, matrices_of("synth-tiny-Q4_K_M.gguf", GgmlType::Q4_K));
  const double q4k_synth = requant_error(GgmlType::Q4_K, matrices_of("synth-tiny-Q4_K_M.gguf", GgmlType::Q6_K));
  INFO("Q4_K->FQ3 trained " << fq3_trained << ", synth " << fq3_synth << "; Q6_K->Q4_K trained " << q4k_trained
                            << ", synth " << q4k_synth);
  CHECK(fq3_trained < 0.139);
  CHECK(fq3_synth < 0.139);
  CHECK(q4k_trained < 0.073);
  CHECK(q4k_synth < 0.073);
  // ... and not better than 3 / 4 bits allow (a decoder reading the wrong
  // bits, or a quantiser writing more levels, would show here).
  CHECK(fq3_trained > 0.12);
  CHECK(q4k_trained > 0.06);
  // quantize_row(FQ3) is the same quantiser as requantize_row(FQ3).
  const std::vector<float> g = test::gaussian(4096, 7);
  std::vector<uint8_t> a(test::row_bytes(GgmlType::FQ3, 4096)), b(a.size());
  quantize_row(GgmlType::FQ3, g.data(), a.data(), 4096);
  requantize_row(GgmlType::FQ3, g.data(), b.data(), 4096);
  CHECK(a == b);
  // Gaussian data: 3 bits with a per-32 affine grid.
  const std::vector<float> y = test::round_trip(GgmlType::FQ3, g);
  CHECK(test::rel_rms(g.data(), y.data(), g.size()) < 0.15);
}

TEST_CASE("FQ3: special inputs", "[quant][fq3]") {
  std::vector<float> zero(512, 0.0f), y(512, 1.0f);
  std::vector<uint8_t> q(2 * 112);
  quantize_row(GgmlType::FQ3, zero.data(), q.data(), 512);
  dequant_row(GgmlType::FQ3, q.data(), y.data(), 512);
  for (float v : y) CHECK(v == 0.0f);
  // A constant negative group is exact up to the 6-bit min's rounding (the
  // min alone carries it); a positive one is d·sc·q with q = 7.
  std::vector<float> c(256, -0.5f);
  for (int i = 128; i < 256; ++i) c[size_t(i)] = 0.25f;
  quantize_row(GgmlType::FQ3, c.data(), q.data(), 256);
  dequant_row(GgmlType::FQ3, q.data(), y.data(), 256);
  for (int i = 0; i < 256; ++i) CHECK(y[size_t(i)] == Approx(c[size_t(i)]).margin(0.5f / 63));
  // Non-finite and out-of-range input is refused, naming the type.
  c[17] = std::nanf("");
  CHECK_THROWS_WITH(quantize_row(GgmlType::FQ3, c.data(), q.data(), 256), Catch::Contains("FQ3"));
  CHECK_THROWS_WITH(requantize_row(GgmlType::FQ3, c.data(), q.data(), 256), Catch::Contains("not finite"));
  c[17] = 1e12f;
  CHECK_THROWS_WITH(requantize_row(GgmlType::Q4_K, c.data(), q.data(), 256), Catch::Contains("beyond"));
  CHECK_THROWS_WITH(requantize_row(GgmlType::Q6_K, c.data(), q.data(), 256), Catch::Contains("Q6_K"));
  CHECK_THROWS_WITH(dequant_row(GgmlType::FQ3, q.data(), y.data(), 100), Catch::Contains("FQ3"));
}

TEST_CASE("FQ3: the reference dot product equals the decoded values' product", "[quant][fq3]") {
  const int64_t n = 1024;
  const std::vector<float> w = test::gaussian(size_t(n), 11), x = test::gaussian(size_t(n), 12);
  std::vector<uint8_t> wq(test::row_bytes(GgmlType::FQ3, n)), xq(test::row_bytes(GgmlType::Q8_K, n));
  quantize_row(GgmlType::FQ3, w.data(), wq.data(), n);
  quantize_row(GgmlType::Q8_K, x.data(), xq.data(), n);
  std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
  dequant_row(GgmlType::FQ3, wq.data(), wd.data(), n);
  dequant_row(GgmlType::Q8_K, xq.data(), xd.data(), n);
  double want = 0, mag = 0;
  for (int64_t i = 0; i < n; ++i) {
    want += double(wd[size_t(i)]) * double(xd[size_t(i)]);
    mag += std::fabs(double(wd[size_t(i)]) * double(xd[size_t(i)]));
  }
  // Integer sums, then a few f32 products per block: within 1e-5 of Σ|w x|.
  CHECK(std::fabs(double(vec_dot_ref(GgmlType::FQ3, n, wq.data(), xq.data())) - want) <= 1e-5 * mag);
}
