// dequant_row on blocks built byte by byte. For every type the expected value of
// every element comes from a small per-element formula written here from the
// format description (ggml's layout), independent of the engine's loops; a few
// elements per type are also checked against numbers worked out by hand (in the
// comments), which pins down the scale packing (Q4_K/Q5_K j < 4 and j >= 4,
// Q3_K's 6-bit scales), the high bits and the signs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

using namespace fish;

namespace {

// Halves used below (exact): 0.5, 0.25, 2, -2, 1, -1, 0.125.
constexpr uint16_t H_HALF = 0x3800, H_QUARTER = 0x3400, H_TWO = 0x4000, H_MTWO = 0xC000, H_ONE = 0x3C00,
                   H_MONE = 0xBC00, H_EIGHTH = 0x3000;

// Deterministic filler bytes (a 32-bit LCG's top byte).
struct Bytes {
  uint32_t s;
  explicit Bytes(uint32_t seed) : s(seed) {}
  uint8_t next() {
    s = s * 1664525u + 1013904223u;
    return uint8_t(s >> 24);
  }
  void fill(uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = next();
  }
};

template <typename Block>
std::vector<float> decode(GgmlType t, const std::vector<Block>& blocks, int block_elems) {
  std::vector<float> out(blocks.size() * size_t(block_elems), -12345.0f);
  dequant_row(t, blocks.data(), out.data(), int64_t(out.size()));
  return out;
}

float h(uint16_t bits) { return fp16_to_fp32(bits); }

}  // namespace

TEST_CASE("F32, F16 and BF16 rows decode exactly", "[quant][dequant]") {
  const float f[4] = {1.5f, -0.0f, 3.0e-39f, -7.25e20f};
  float out[4];
  dequant_row(GgmlType::F32, f, out, 4);
  CHECK(std::memcmp(f, out, sizeof f) == 0);

  // half bits -> value: 1, -2, smallest subnormal 2^-24, largest subnormal
  // 1023·2^-24, smallest normal 2^-14, 65504, 1/3 rounded, -0, +inf, -inf, NaN
  const uint16_t hb[12] = {0x3C00, 0xC000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x3555, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xB800};
  const float hv[12] = {1.0f, -2.0f, 0x1p-24f, 1023 * 0x1p-24f, 0x1p-14f, 65504.0f, 0.333251953125f, -0.0f,
                        INFINITY, -INFINITY, NAN, -0.5f};
  float ho[12];
  dequant_row(GgmlType::F16, hb, ho, 12);
  for (int i = 0; i < 12; ++i) {
    INFO("half " << i);
    if (std::isnan(hv[i])) {
      CHECK(std::isnan(ho[i]));
    } else {
      CHECK(ho[i] == hv[i]);
      CHECK(std::signbit(ho[i]) == std::signbit(hv[i]));
    }
  }

  // bf16 bits are the top half of an f32: 1, -3, +inf, 2^-133 (f32 subnormal), 0
  const uint16_t bb[5] = {0x3F80, 0xC040, 0x7F80, 0x0001, 0x0000};
  const float bv[5] = {1.0f, -3.0f, INFINITY, 0x1p-133f, 0.0f};
  float bo[5];
  dequant_row(GgmlType::BF16, bb, bo, 5);
  for (int i = 0; i < 5; ++i) CHECK(bo[i] == bv[i]);
}

TEST_CASE("Q4_0 and Q4_1 blocks decode", "[quant][dequant]") {
  // qs[j] = j | (15 - j) << 4: element j has level j, element j + 16 level 15 - j.
  std::vector<BlockQ4_0> b(2);
  b[0].d = H_HALF;
  b[1].d = H_MTWO;
  for (int j = 0; j < 16; ++j) {
    b[0].qs[j] = uint8_t(j | ((15 - j) << 4));
    b[1].qs[j] = 0x8F;  // low 15, high 8
  }
  const auto y = decode(GgmlType::Q4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    CHECK(y[j] == float(j - 8) * 0.5f);
    CHECK(y[16 + j] == float(7 - j) * 0.5f);
    CHECK(y[32 + j] == 7 * -2.0f);
    CHECK(y[48 + j] == 0.0f);
  }
  CHECK(y[0] == -4.0f);   // (0 - 8) · 0.5
  CHECK(y[31] == -4.0f);  // level 0 in the high nibble of qs[15]
  CHECK(y[32] == -14.0f);

  std::vector<BlockQ4_1> c(1);
  c[0].d = H_HALF;
  c[0].m = H_MONE;
  for (int j = 0; j < 16; ++j) c[0].qs[j] = uint8_t(j | ((15 - j) << 4));
  const auto z = decode(GgmlType::Q4_1, c, 32);
  for (int j = 0; j < 16; ++j) {
    CHECK(z[j] == float(j) * 0.5f - 1.0f);
    CHECK(z[16 + j] == float(15 - j) * 0.5f - 1.0f);
  }
  CHECK(z[0] == -1.0f);
  CHECK(z[16] == 6.5f);  // 15 · 0.5 − 1
}

TEST_CASE("Q5_0 and Q5_1 blocks decode (fifth bit from qh)", "[quant][dequant]") {
  Bytes rnd(7);
  std::vector<BlockQ5_0> b(3);
  std::vector<BlockQ5_1> c(3);
  const uint16_t ds[3] = {H_QUARTER, H_MTWO, H_ONE};
  for (int i = 0; i < 3; ++i) {
    b[i].d = c[i].d = ds[i];
    c[i].m = i == 1 ? H_TWO : H_MONE;
    rnd.fill(b[i].qs, 16);
    rnd.fill(b[i].qh, 4);
    std::memcpy(c[i].qs, b[i].qs, 16);
    std::memcpy(c[i].qh, b[i].qh, 4);
  }
  // Hand-set block 0: qs[0] = 0x53, qh = bit 0 and bit 16 only.
  b[0].qs[0] = c[0].qs[0] = 0x53;
  const uint8_t qh0[4] = {0x01, 0x00, 0x01, 0x00};
  std::memcpy(b[0].qh, qh0, 4);
  std::memcpy(c[0].qh, qh0, 4);

  const auto y = decode(GgmlType::Q5_0, b, 32);
  const auto z = decode(GgmlType::Q5_1, c, 32);
  for (int i = 0; i < 3; ++i) {
    const uint32_t qh = uint32_t(b[i].qh[0]) | uint32_t(b[i].qh[1]) << 8 | uint32_t(b[i].qh[2]) << 16 |
                        uint32_t(b[i].qh[3]) << 24;
    for (int e = 0; e < 32; ++e) {
      const int nib = e < 16 ? (b[i].qs[e] & 15) : (b[i].qs[e - 16] >> 4);
      const int q = nib + 16 * int((qh >> e) & 1);
      INFO("block " << i << " element " << e);
      CHECK(y[32 * i + e] == float(q - 16) * h(ds[i]));
      CHECK(z[32 * i + e] == float(q) * h(ds[i]) + h(c[i].m));
    }
  }
  CHECK(y[0] == 0.75f);    // level 3 + 16 = 19 -> (19 - 16) · 0.25
  CHECK(y[16] == 1.25f);   // high nibble of qs[0] is 5, qh bit 16 set: 21 -> (21 - 16) · 0.25
  CHECK(z[16] == 4.25f);   // 21 · 0.25 − 1
}

TEST_CASE("Q8_0 and Q8_K blocks decode", "[quant][dequant]") {
  std::vector<BlockQ8_0> b(2);
  b[0].d = H_EIGHTH;
  b[1].d = H_MTWO;
  for (int j = 0; j < 32; ++j) {
    b[0].qs[j] = int8_t(j * 8 - 128);  // -128, -120, ..., 120
    b[1].qs[j] = int8_t(127 - j);
  }
  const auto y = decode(GgmlType::Q8_0, b, 32);
  for (int j = 0; j < 32; ++j) {
    CHECK(y[j] == float(j * 8 - 128) * 0.125f);
    CHECK(y[32 + j] == float(127 - j) * -2.0f);
  }
  CHECK(y[0] == -16.0f);

  std::vector<BlockQ8_K> k(1);
  k[0].d = -0.375f;
  for (int j = 0; j < QK_K; ++j) k[0].qs[j] = int8_t(j - 128);
  const auto z = decode(GgmlType::Q8_K, k, QK_K);
  for (int j = 0; j < QK_K; ++j) CHECK(z[j] == float(j - 128) * -0.375f);
}

// Q2_K element e: group g = e / 16 (scale byte g: low nibble scale, high nibble
// min); 2-bit level at bits 2s of qs[32·half + l] with half = e / 128,
// s = (e % 128) / 32, l = e % 32. x = d·sc·q − dmin·m.
TEST_CASE("Q2_K blocks decode", "[quant][dequant]") {
  Bytes rnd(11);
  std::vector<BlockQ2_K> b(2);
  for (auto& blk : b) {
    rnd.fill(blk.scales, sizeof blk.scales);
    rnd.fill(blk.qs, sizeof blk.qs);
  }
  b[0].d = H_HALF;
  b[0].dmin = H_TWO;
  b[1].d = H_MTWO;
  b[1].dmin = H_QUARTER;
  b[0].scales[0] = 0x35;  // scale 5, min 3
  b[0].scales[9] = 0x1F;  // scale 15, min 1
  b[0].qs[0] = 0xE4;      // fields 0, 1, 2, 3
  b[0].qs[48] = 0x03;     // field 0 = 3
  const auto y = decode(GgmlType::Q2_K, b, QK_K);
  for (int i = 0; i < 2; ++i) {
    for (int e = 0; e < QK_K; ++e) {
      const int g = e / 16, half = e / 128, s = (e % 128) / 32, l = e % 32;
      const int q = (b[i].qs[32 * half + l] >> (2 * s)) & 3;
      const float expect = h(b[i].d) * float(b[i].scales[g] & 15) * float(q) - h(b[i].dmin) * float(b[i].scales[g] >> 4);
      INFO("block " << i << " element " << e);
      CHECK(y[QK_K * i + e] == expect);
    }
  }
  CHECK(y[0] == -6.0f);     // q 0: 0 − 2·3
  CHECK(y[32] == 0.5f * float(b[0].scales[2] & 15) - 2.0f * float(b[0].scales[2] >> 4));  // q 1 (field 1 of qs[0])
  CHECK(y[144] == 20.5f);   // group 9, q 3 (qs[48]): 0.5·15·3 − 2·1
}

// Q3_K element e: half = e / 128, s = (e % 128) / 32, l = e % 32; 2 low bits at
// bits 2s of qs[32·half + l]; the high bit is bit (4·half + s) of hmask[l] and a
// clear bit subtracts 4. Scale g = e / 16 is 6 bits: low 4 from
// scales[g] & 15 (g < 8) or scales[g - 8] >> 4, high 2 from bits 2·(g / 4) of
// scales[8 + g % 4]; the stored value is biased by 32. x = d·(sc − 32)·v.
TEST_CASE("Q3_K blocks decode (6-bit scale packing, high-bit mask)", "[quant][dequant]") {
  Bytes rnd(13);
  std::vector<BlockQ3_K> b(2);
  for (auto& blk : b) {
    rnd.fill(blk.hmask, sizeof blk.hmask);
    rnd.fill(blk.qs, sizeof blk.qs);
    rnd.fill(blk.scales, sizeof blk.scales);
  }
  b[0].d = H_HALF;
  b[1].d = H_MONE;
  b[0].scales[0] = 0x21;  // scale 0 low 1, scale 8 low 2
  b[0].scales[4] = 0x5A;  // scale 4 low 10, scale 12 low 5
  b[0].scales[8] = 0xE4;  // high bits: scale 0 -> 0, scale 4 -> 1, scale 8 -> 2, scale 12 -> 3
  b[0].qs[0] = 0x1B;      // fields 3, 2, 1, 0
  b[0].qs[32] = 0x02;     // fields 2, 0, 0, 0
  b[0].hmask[0] = 0x05;   // bits 0 and 2 set, bits 4 and 6 clear
  const auto y = decode(GgmlType::Q3_K, b, QK_K);
  for (int i = 0; i < 2; ++i) {
    for (int e = 0; e < QK_K; ++e) {
      const int half = e / 128, s = (e % 128) / 32, l = e % 32, g = e / 16;
      const int lo2 = (b[i].qs[32 * half + l] >> (2 * s)) & 3;
      const int hbit = (b[i].hmask[l] >> (4 * half + s)) & 1;
      const int v = lo2 - (hbit ? 0 : 4);
      const int sc_lo = g < 8 ? (b[i].scales[g] & 15) : (b[i].scales[g - 8] >> 4);
      const int sc_hi = (b[i].scales[8 + g % 4] >> (2 * (g / 4))) & 3;
      const int sc = (sc_lo | (sc_hi << 4)) - 32;
      INFO("block " << i << " element " << e);
      CHECK(y[QK_K * i + e] == h(b[i].d) * float(sc) * float(v));
    }
  }
  CHECK(y[0] == -46.5f);   // scale 1 − 32 = −31, q 3 with high bit: 0.5·−31·3
  CHECK(y[64] == -3.0f);   // scale 4 = 10 | 1<<4 = 26 → −6; field 2 of qs[0] = 1, high bit set: 0.5·−6·1
  CHECK(y[128] == -2.0f);  // scale 8 = 2 | 2<<4 = 34 → 2; qs[32] field 0 = 2, bit 4 clear: 2 − 4 = −2
  CHECK(y[192] == -42.0f); // scale 12 = 5 | 3<<4 = 53 → 21; field 2 = 0, bit 6 clear: −4; 0.5·21·−4
}

namespace {

// The Q4_K / Q5_K 6-bit scale and min of group j, from the 12 packed bytes:
// j < 4: scale = s[j] & 63, min = s[j + 4] & 63; j >= 4: low 4 bits from the
// nibbles of s[j + 4], high 2 bits from the top bits of s[j − 4] / s[j].
void k4_scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

const uint8_t kScales12[12] = {0x41, 0x02, 0xC3, 0x3F, 0x05, 0x86, 0x07, 0x08, 0x21, 0x43, 0x65, 0x87};

}  // namespace

// Q4_K element e: chunk c = e / 64 uses qs[32c .. 32c + 31]; elements 64c + l
// take the low nibble, 64c + 32 + l the high one. Group j = e / 32.
// x = d·sc_j·q − dmin·m_j. Q5_K adds bit (2c + (e % 64 >= 32)) of qh[e % 32] as 16.
TEST_CASE("Q4_K and Q5_K blocks decode (scale packing j < 4 and j >= 4, fifth bit)", "[quant][dequant]") {
  Bytes rnd(17);
  std::vector<BlockQ4_K> b(3);
  std::vector<BlockQ5_K> c(3);
  const uint16_t d[3] = {H_HALF, H_MTWO, H_EIGHTH}, dmin[3] = {H_QUARTER, H_ONE, H_MONE};
  for (int i = 0; i < 3; ++i) {
    b[i].d = c[i].d = d[i];
    b[i].dmin = c[i].dmin = dmin[i];
    rnd.fill(b[i].scales, 12);
    rnd.fill(b[i].qs, sizeof b[i].qs);
    rnd.fill(c[i].qh, sizeof c[i].qh);
    std::memcpy(c[i].scales, b[i].scales, 12);
    std::memcpy(c[i].qs, b[i].qs, sizeof b[i].qs);
  }
  std::memcpy(b[0].scales, kScales12, 12);
  std::memcpy(c[0].scales, kScales12, 12);
  b[0].qs[0] = c[0].qs[0] = 0x9A;    // low 10, high 9
  b[0].qs[64] = c[0].qs[64] = 0x4F;  // low 15, high 4
  c[0].qh[0] = 0x12;                 // bits 1 and 4

  const auto y = decode(GgmlType::Q4_K, b, QK_K);
  const auto z = decode(GgmlType::Q5_K, c, QK_K);
  for (int i = 0; i < 3; ++i) {
    for (int e = 0; e < QK_K; ++e) {
      const int ch = e / 64, upper = (e % 64) / 32, l = e % 32, j = e / 32;
      const int nib = upper ? (b[i].qs[32 * ch + l] >> 4) : (b[i].qs[32 * ch + l] & 15);
      int sc, m;
      k4_scale_min(b[i].scales, j, sc, m);
      const int q5 = nib + 16 * ((c[i].qh[l] >> (2 * ch + upper)) & 1);
      INFO("block " << i << " element " << e);
      CHECK(y[QK_K * i + e] == h(d[i]) * float(sc) * float(nib) - h(dmin[i]) * float(m));
      CHECK(z[QK_K * i + e] == h(d[i]) * float(sc) * float(q5) - h(dmin[i]) * float(m));
    }
  }
  // Scales of kScales12: sc0 1, m0 5; sc1 2, m1 6; sc4 = 1 | 1<<4 = 17, m4 = 2;
  // sc5 = 3, m5 = 4 | 2<<4 = 36. d 0.5, dmin 0.25.
  CHECK(y[0] == 3.75f);     // 0.5·1·10 − 0.25·5
  CHECK(y[32] == 7.5f);     // 0.5·2·9 − 0.25·6
  CHECK(y[128] == 127.0f);  // 0.5·17·15 − 0.25·2
  CHECK(y[160] == -3.0f);   // 0.5·3·4 − 0.25·36
  CHECK(z[0] == 3.75f);     // qh bit 0 clear
  CHECK(z[32] == 23.5f);    // bit 1 set: 0.5·2·25 − 1.5
  CHECK(z[128] == 263.0f);  // bit 4 set: 0.5·17·31 − 0.5
  CHECK(z[160] == -3.0f);   // bit 5 clear
}

// Q6_K element e: half = e / 128, r = (e % 128) / 32, l = e % 32; low nibble of
// ql[64·half + l + 32·(r & 1)] (the high nibble when r >= 2); top 2 bits at bits
// 2r of qh[32·half + l]. Scale: int8 scales[e / 16]. x = d·sc·(q − 32).
TEST_CASE("Q6_K blocks decode", "[quant][dequant]") {
  Bytes rnd(19);
  std::vector<BlockQ6_K> b(2);
  for (auto& blk : b) {
    rnd.fill(blk.ql, sizeof blk.ql);
    rnd.fill(blk.qh, sizeof blk.qh);
    rnd.fill(reinterpret_cast<uint8_t*>(blk.scales), sizeof blk.scales);
  }
  b[0].d = H_QUARTER;
  b[1].d = H_MTWO;
  b[0].scales[0] = -3;
  b[0].scales[4] = 2;
  b[0].scales[5] = 7;
  b[0].scales[10] = -128;
  b[0].scales[15] = 127;
  b[0].ql[0] = 0x5A;
  b[0].qh[0] = 0x9C;  // fields r0 0, r1 3, r2 1, r3 2
  b[0].ql[16] = 0xF0;
  b[0].qh[16] = 0x30;
  b[0].ql[96] = 0x01;
  b[0].qh[32] = 0x00;
  b[0].ql[127] = 0x80;
  b[0].qh[63] = 0xC0;
  const auto y = decode(GgmlType::Q6_K, b, QK_K);
  for (int i = 0; i < 2; ++i) {
    for (int e = 0; e < QK_K; ++e) {
      const int half = e / 128, r = (e % 128) / 32, l = e % 32;
      const uint8_t lb = b[i].ql[64 * half + l + 32 * (r & 1)];
      const int lo = r >= 2 ? (lb >> 4) : (lb & 15);
      const int hi = (b[i].qh[32 * half + l] >> (2 * r)) & 3;
      const int q = lo | (hi << 4);
      INFO("block " << i << " element " << e);
      CHECK(y[QK_K * i + e] == h(b[i].d) * float(b[i].scales[e / 16]) * float(q - 32));
    }
  }
  CHECK(y[0] == 16.5f);     // q 10: 0.25·−3·(10 − 32)
  CHECK(y[64] == -5.5f);    // q 5 | 1<<4 = 21: 0.25·2·−11
  CHECK(y[80] == 54.25f);   // q 15 | 3<<4 = 63: 0.25·7·31
  CHECK(y[160] == 992.0f);  // q 1: 0.25·−128·−31
  CHECK(y[255] == 762.0f);  // q 8 | 3<<4 = 56: 0.25·127·24
}
