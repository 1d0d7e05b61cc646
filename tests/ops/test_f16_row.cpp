// The KV store's f32 -> f16 row conversion (cpu/f16_row.h): every variant this
// CPU runs gives the bits of common/fp16.h's fp32_to_fp16, element for
// element, so switching variants never changes a cached K/V value.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/fp16.h"
#include "cpu/f16_row.h"

using namespace fish;

namespace {

// Converts x with fn (in one call, and again at odd offsets and lengths so
// that every element also goes through the tails) and counts the elements
// whose bits differ from fp32_to_fp16.
size_t count_mismatches(Fp32ToFp16RowFn fn, const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size() + 1, 0xdead);
  fn(x.data(), h.data(), int64_t(x.size()));
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (h[i] != fp32_to_fp16(x[i])) {
      if (bad < 5)
        UNSCOPED_INFO("float bits " << std::hex << fp32_to_bits(x[i]) << ": " << h[i] << " vs "
                                    << fp32_to_fp16(x[i]));
      ++bad;
    }
  if (h[x.size()] != 0xdead) ++bad;  // wrote past n
  // Short rows from odd starts: 0..40 elements cover the 16-wide body, the
  // 8-wide step and every scalar tail length.
  for (size_t off = 0; off + 41 <= x.size() && off < 2000; off += 37)
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<uint16_t> s(size_t(n) + 1, 0xbeef);
      fn(x.data() + off, s.data(), n);
      for (int64_t i = 0; i < n; ++i) bad += s[size_t(i)] != fp32_to_fp16(x[off + size_t(i)]);
      bad += s[size_t(n)] != 0xbeef;
    }
  return bad;
}

std::vector<float> edge_values() {
  std::vector<float> x;
  // A stride through all 2^32 bit patterns: every exponent, both signs, NaNs
  // (quiet and signalling, many payloads), infinities, float subnormals.
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4093) x.push_back(fp32_from_bits(uint32_t(b)));
  // The rounding boundaries of the halves: each tie and the floats beside it,
  // normal and subnormal halves.
  for (uint32_t hb = 0; hb < 0x7c00; hb += 3) {
    const float lo = fp16_to_fp32(uint16_t(hb)), hi = fp16_to_fp32(uint16_t(hb + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: a tie
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  // Overflow (65520 is the first float that rounds to inf), the smallest
  // halves, zeros, infinities and NaNs with payloads F16C would keep.
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, inf, 0x1p-25f, 0x1.000002p-25f, 0x1p-24f,
                  0x1.8p-24f, 0x1p-14f, 0x1.ffcp-15f, 0x1p-149f, 0x1p-126f, 0.0f}) {
    x.push_back(v);
    x.push_back(-v);
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fc12345u, 0x7fffffffu, 0x7f802000u, 0x7fbfe000u}) {
    x.push_back(fp32_from_bits(nan));
    x.push_back(fp32_from_bits(nan | 0x80000000u));
  }
  // What K and V rows hold: activations of a few units.
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 4.f);
  for (int i = 0; i < 100000; ++i) x.push_back(nd(rng));
  return x;
}

}  // namespace

TEST_CASE("f32 to f16 rows: every variant gives fp32_to_fp16's bits, edge cases and tails", "[ops][f16]") {
  const std::vector<float> x = edge_values();
  int ran = 0;
  for (const char* name : {"scalar", "f16c"}) {
    const Fp32ToFp16RowFn fn = fp32_to_fp16_row_variant(name);
    if (!fn) {
      WARN("variant " << name << " not run on this CPU");
      continue;
    }
    INFO("variant " << name);
    CHECK(count_mismatches(fn, x) == 0);
    ++ran;
  }
  CHECK(ran >= 1);
  CHECK(count_mismatches(&fp32_to_fp16_row, x) == 0);  // the dispatched one
}

// All 2^32 floats (hidden: ~10 s; run with test_ops "[.f16-all]").
TEST_CASE("f32 to f16 rows: every float, every variant", "[.f16-all]") {
  for (const char* name : {"scalar", "f16c"}) {
    const Fp32ToFp16RowFn fn = fp32_to_fp16_row_variant(name);
    if (!fn) continue;
    INFO("variant " << name);
    std::vector<float> x(size_t(1) << 20);
    std::vector<uint16_t> h(x.size());
    size_t bad = 0;
    for (uint64_t b0 = 0; b0 < (uint64_t(1) << 32); b0 += x.size()) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = fp32_from_bits(uint32_t(b0 + i));
      fn(x.data(), h.data(), int64_t(x.size()));
      for (size_t i = 0; i < x.size(); ++i) bad += h[i] != fp32_to_fp16(x[i]);
    }
    CHECK(bad == 0);
  }
}
