// FQ3 (fish's 3-bit layout of re-quantised device copies) decoded by
// fish_vulkan's shaders against ../shared/reference/fq3 (fq3_reference.h), to
// the bit. The 64 blocks are one 64-row x 256 matrix and token t of x is the
// one-hot vector e_c, so y[t][r] must be the reference value (r, c):
//   - tiled_FQ3 (dequant8 in dequant.glsl, also behind tls_FQ3 / tc_FQ3)
//     forms d·sc·q and dmin·m exactly in f32 and rounds their difference
//     once, as the CPU decoder does; the other 255 products are w·0 = 0 and
//     adding zeros is exact. 256 tokens: every column in one product.
//   - matvec_FQ3 (matvec_units.glsl: codes as 0.5 + q/16, Σqx = 16Σfx - 8Σx)
//     gives 16·f - 8 = q exactly for the one hot element, so again
//     d·sc·q - dmin·m; 1..4 tokens per product.
// Block 1 (d = dmin = NaN) must decode to NaN, its row only (one block per
// row). Both run with f32 x (int8 off; coopmat off: its f16 products are not
// exact); the int8 kernels quantise x and are held to the CPU's int8 product
// of these blocks in test_vk_int8.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "fq3_reference.h"
#include "test_paths.h"
#include "vk_test_util.h"

using namespace fish;
using namespace fish::vktest;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::unique_ptr<vk::VulkanBackend> open_f32(const char* test) {
  auto be = open_backend(test);
  if (be) be->kernels()->set_int8(false), be->kernels()->set_coopmat(false);
  return be;
}

// y [n_tok][64] of x = e_{c0}, e_{c0+1}, ... against the reference: NaN for
// the NaN block's row, the same bits elsewhere. Returns the mismatches.
int64_t mismatches(const Fq3Reference& ref, const std::vector<float>& y, int c0, int n_tok) {
  int64_t bad = 0;
  for (int t = 0; t < n_tok; ++t) {
    for (int r = 0; r < kFq3RefBlocks; ++r) {
      const float got = y[size_t(t) * kFq3RefBlocks + size_t(r)];
      const float want = ref.values[size_t(r) * 256 + size_t(c0 + t)];
      const bool ok = r == kFq3NanBlock ? std::isnan(got) : bits(got) == bits(want);
      if (!ok && bad++ < 5)
        std::printf("  row %d column %d: got %.9g (%08x), want %.9g (%08x)\n", r, c0 + t, double(got), bits(got),
                    double(want), bits(want));
    }
  }
  return bad;
}

std::vector<float> one_hot(int c0, int n_tok) {
  std::vector<float> x(size_t(n_tok) * 256, 0.0f);
  for (int t = 0; t < n_tok; ++t) x[size_t(t) * 256 + size_t(c0 + t)] = 1.0f;
  return x;
}

}  // namespace

TEST_CASE("FQ3 reference file: 64 blocks, block 1 all NaN, the others finite", "[vulkan][fq3]") {
  const Fq3Reference ref = read_fq3_reference(test::shared_path("reference/fq3"));
  REQUIRE(ref.m.n_out == kFq3RefBlocks);
  int64_t nan_in_nan_block = 0, nan_elsewhere = 0;
  for (size_t i = 0; i < ref.values.size(); ++i)
    (int(i / 256) == kFq3NanBlock ? nan_in_nan_block : nan_elsewhere) += std::isnan(ref.values[i]) ? 1 : 0;
  CHECK(nan_in_nan_block == 256);
  CHECK(nan_elsewhere == 0);
}

TEST_CASE("FQ3 reference blocks through tiled_FQ3 with one-hot x: every value to the bit", "[vulkan][fq3]") {
  auto be = open_f32("FQ3 reference tiled");
  if (!be) FISH_SKIP(skip_reason());
  const Fq3Reference ref = read_fq3_reference(test::shared_path("reference/fq3"));
  REQUIRE(ref.m.n_out == kFq3RefBlocks);
  bool sup = false;
  REQUIRE(be->supports(uint32_t(GgmlType::FQ3), &sup));
  REQUIRE(sup);
  vk::Weight* w = be->upload(upload_desc(ref.m));
  INFO(be->error());
  REQUIRE(w);
  // 256 tokens (4 token tiles), and 37 starting at column 200 (a partial tile).
  for (const auto& [c0, n_tok] : {std::pair{0, 256}, std::pair{200, 37}}) {
    const std::vector<float> x = one_hot(c0, n_tok);
    std::vector<float> y(size_t(n_tok) * kFq3RefBlocks, -1.0f);
    REQUIRE(be->matmul(w, x.data(), n_tok, y.data()));
    CAPTURE(c0, n_tok);
    CHECK(mismatches(ref, y, c0, n_tok) == 0);
  }
  REQUIRE(be->release(w));
}

TEST_CASE("FQ3 reference blocks through matvec_FQ3 with one-hot x: every value to the bit", "[vulkan][fq3]") {
  auto be = open_f32("FQ3 reference matvec");
  if (!be) FISH_SKIP(skip_reason());
  const Fq3Reference ref = read_fq3_reference(test::shared_path("reference/fq3"));
  REQUIRE(ref.m.n_out == kFq3RefBlocks);
  vk::Weight* w = be->upload(upload_desc(ref.m));
  REQUIRE(w);
  // Every column: 4 tokens per product (1, 2, 3 on the first columns), with
  // the default shape and with 4 rows per subgroup (a unit's rows share x).
  for (uint32_t rows : {0u, 4u}) {
    be->kernels()->set_override(rows, 0);
    int64_t bad = 0;
    for (int c0 = 0; c0 < 256;) {
      const int n_tok = c0 < 6 ? 1 + c0 / 2 : 4;
      const int nt = std::min(n_tok, 256 - c0);
      const std::vector<float> x = one_hot(c0, nt);
      std::vector<float> y(size_t(nt) * kFq3RefBlocks, -1.0f);
      REQUIRE(be->matmul(w, x.data(), nt, y.data()));
      bad += mismatches(ref, y, c0, nt);
      c0 += nt;
    }
    CAPTURE(rows);
    CHECK(bad == 0);
  }
  be->kernels()->set_override(0, 0);
  REQUIRE(be->release(w));
}
