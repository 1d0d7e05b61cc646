// The span's kernels one at a time against their CPU references (span_rig.h):
// rmsnorm, q/k preparation + KV store (biases, q/k norms, normal / NeoX RoPE,
// partial rotary dims, frequency factors), attention (plain and fused, one or
// several context splits, one or several tokens, head dims 8..256, groups
// 1..7, a KV group or one query head per workgroup, B32 output rows; rows of
// several sequences with the RoPE / KV store; a prompt chunk on query tiles), and the
// span variants of the matvec / tiled kernels (scaled x, residual add, silu
// epilogue, x·x2 input, the norm epilogue; FQ3 among the weight types) with
// the spec's matmul bound, and the coopmat prefill's f16 rows in and out at
// every tile width (skipped without cooperative matrices).
// Tolerances are stated per case.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/fp16.h"
#include "cpu/matmul.h"
#include "quant/quant.h"
#include "span.h"
#include "span_rig.h"
#include "vk_test_util.h"
#include "vk_test_math.h"

using namespace fish;
using namespace fish::vktest;
using vk::SpanPush;

namespace {

uint32_t pack_half2(float a, float b) { return uint32_t(fp32_to_fp16(a)) | uint32_t(fp32_to_fp16(b)) << 16; }

// Half i of 32-bit words (rig.get_words), two per word as pack_half2 packs them.
float half_in(const std::vector<uint32_t>& words, size_t i) {
  return fp16_to_fp32(uint16_t(words[i / 2] >> (16 * (i & 1))));
}

// The first n halves of words read back from the arena (rig.get: floats
// holding the words' bits), two per word as pack_half2 packs them.
std::vector<float> unpack_halves(const std::vector<float>& words, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &words[i / 2], 4);
    out[i] = fp16_to_fp32(uint16_t(u >> (16 * (i & 1))));
  }
  return out;
}

}  // namespace

TEST_CASE("span rmsnorm kernel vs CPU", "[vulkan][span]") {
  auto be = open_backend("span rmsnorm");
  if (!be) FISH_SKIP(skip_reason());
  const int E = 264, n_tok = 3;
  SpanRig rig(*be, 64 + 2 * n_tok * E + 64, 4, E, 4);
  const auto x = randn(size_t(n_tok) * E, 1, 3.0f), w = uniform(size_t(E), 2, 0.7f, 1.3f);
  rig.put(rig.arena(), 64, x);
  rig.put(rig.params(), 0, w);
  SpanPush p;
  p.n_tok = n_tok, p.n_embd = E, p.x_off = 64, p.y_off = 64 + n_tok * E, p.norm_off = 0, p.eps = 1e-5f;
  rig.run([&](VkCommandBuffer c) { be->span_kernels()->rmsnorm(c, rig.aux_set(), p); });
  const auto y = rig.get(rig.arena(), p.y_off, size_t(n_tok) * E);
  std::vector<float> ref(y.size());
  for (int t = 0; t < n_tok; ++t) ref_rmsnorm(&x[size_t(t) * E], w.data(), &ref[size_t(t) * E], E, 1e-5f);
  const double d = max_diff(y.data(), ref.data(), y.size());
  INFO("max |y - ref| " << d << " of max |ref| " << max_abs(ref));
  CHECK(d <= 1e-5 * max_abs(ref));  // f32 tree sum vs double: ~1e-7 relative
  // HALF (the coopmat prefill's x): the same rows as f16, packed two per word
  // from the region's start; the words past them untouched.
  const uint32_t words = uint32_t(n_tok * E / 2);
  rig.put(rig.arena(), p.y_off, std::vector<float>(size_t(n_tok) * E, 7.0f));
  rig.run([&](VkCommandBuffer c) { be->span_kernels()->rmsnorm(c, rig.aux_set(), p, false, true); });
  const auto hw = rig.get(rig.arena(), p.y_off, size_t(n_tok) * E);
  const auto yh = unpack_halves(hw, 2 * size_t(words));
  double dh = 0;
  for (size_t i = 0; i < yh.size(); ++i) dh = std::max(dh, std::fabs(double(yh[i]) - ref[i]) / (std::fabs(ref[i]) + 1e-6));
  int64_t touched = 0;
  for (size_t i = words; i < hw.size(); ++i) touched += hw[i] != 7.0f;
  INFO("HALF: max relative |y - ref| " << dh);
  CHECK(dh <= std::ldexp(1.0, -11) + 2e-5);  // one f16 rounding of the f32 result
  CHECK(touched == 0);
}

namespace {

struct PrepCase {
  int D, H, KVH, n_rot;
  bool neox, bias, qk_norm, freqs;
};

}  // namespace

TEST_CASE("span q/k preparation + KV store kernel vs CPU", "[vulkan][span]") {
  auto be = open_backend("span rope_store");
  if (!be) FISH_SKIP(skip_reason());
  const PrepCase cases[] = {
      {16, 4, 2, 16, false, false, false, true},   // llama-3 style frequency factors
      {16, 4, 1, 16, true, true, false, false},    // qwen2: biases, NeoX, one KV head
      {32, 2, 2, 32, true, false, true, false},    // qwen3: q/k norms
      {64, 8, 2, 32, false, true, true, false},    // partial rotary dims
      {8, 8, 4, 8, false, false, false, false},    // stories260K's head_dim
  };
  uint64_t seed = 10;
  for (const PrepCase& c : cases) {
    const int QD = c.H * c.D, KD = c.KVH * c.D, QKV = QD + 2 * KD, n_tok = 3, pos0 = 5, cap = 12;
    const uint32_t qkv_off = 64, qr_off = qkv_off + uint32_t(n_tok * QKV);
    SpanRig rig(*be, qr_off + n_tok * QD + 64, uint64_t(cap) * KD, uint64_t(QD + 2 * KD + 2 * c.D), uint64_t(cap) * c.n_rot);
    const auto qkv = randn(size_t(n_tok) * QKV, seed++, 2.0f);
    const auto bq = randn(QD, seed++, 0.3f), bk = randn(KD, seed++, 0.3f), bv = randn(KD, seed++, 0.3f);
    const auto qn = uniform(c.D, seed++, 0.7f, 1.3f), kn = uniform(c.D, seed++, 0.7f, 1.3f);
    std::vector<float> freqs;
    for (int i = 0; i < c.n_rot / 2; ++i) freqs.push_back(1.0f + 0.25f * float(i));
    const auto rope = rope_table(cap, c.n_rot, 10000.0, 1.0, c.freqs ? freqs.data() : nullptr);
    std::vector<float> params;
    for (const auto* v : {&bq, &bk, &bv, &qn, &kn}) params.insert(params.end(), v->begin(), v->end());
    rig.put(rig.arena(), qkv_off, qkv);
    rig.put(rig.params(), 0, params);
    rig.put(rig.rope(), 0, rope);
    rig.put(rig.arena(), 0, std::vector<uint32_t>{0, 0, 0, 0, uint32_t(pos0), 1, 1});
    SpanPush p;
    p.n_tok = n_tok, p.q_off = qkv_off, p.q_stride = QKV, p.k_off = qkv_off + QD, p.v_off = qkv_off + QD + KD;
    p.qr_off = qr_off, p.kv_cap = cap, p.eps = 1e-6f, p.n_rot = c.n_rot, p.neox = c.neox, p.n_head = c.H;
    if (c.bias) p.bq_off = 0, p.bk_off = QD, p.bv_off = QD + KD;
    if (c.qk_norm) p.qn_off = QD + 2 * KD, p.kn_off = QD + 2 * KD + c.D;
    const vk::SpanKernelShape ks{uint32_t(c.D), uint32_t(c.H / c.KVH), uint32_t(c.KVH)};
    rig.run([&](VkCommandBuffer cmd) { be->span_kernels()->rope_store(cmd, rig.aux_set(), p, ks); });
    const auto qr = rig.get(rig.arena(), qr_off, size_t(n_tok) * QD);
    const auto kvw = rig.get_words(rig.kv(), 0, uint64_t(cap) * KD);  // K and V halves
    double dq = 0, dk = 0, dv = 0, mq = 0;
    for (int t = 0; t < n_tok; ++t) {
      const int pos = pos0 + t;
      for (int h = 0; h < c.H + c.KVH; ++h) {
        const bool is_q = h < c.H;
        const int g = is_q ? h : h - c.H;
        std::vector<float> v(&qkv[size_t(t) * QKV + (is_q ? 0 : QD) + size_t(g) * c.D],
                             &qkv[size_t(t) * QKV + (is_q ? 0 : QD) + size_t(g + 1) * c.D]);
        ref_prep_head(v.data(), c.D, c.bias ? (is_q ? &bq[size_t(g) * c.D] : &bk[size_t(g) * c.D]) : nullptr,
                      c.qk_norm ? (is_q ? qn.data() : kn.data()) : nullptr, 1e-6f, rope.data(), pos, c.n_rot, c.neox, 1.0f);
        for (int i = 0; i < c.D; ++i) {
          if (is_q) {
            dq = std::max(dq, double(std::fabs(qr[size_t(t) * QD + size_t(g) * c.D + i] - v[size_t(i)])));
            mq = std::max(mq, double(std::fabs(v[size_t(i)])));
            continue;
          }
          const size_t hk = size_t(pos) * KD + size_t(g) * c.D + size_t(i);  // half index of K
          const auto half_at = [&](size_t idx) { return half_in(kvw, idx); };
          dk = std::max(dk, double(std::fabs(half_at(hk) - round_f16(v[size_t(i)]))) / std::max(1e-3f, std::fabs(v[size_t(i)])));
          const float vv = qkv[size_t(t) * QKV + QD + KD + size_t(g) * c.D + i] + (c.bias ? bv[size_t(g) * c.D + i] : 0.0f);
          dv = std::max(dv, double(std::fabs(half_at(size_t(cap) * KD + hk) - round_f16(vv))));
        }
      }
    }
    INFO("D " << c.D << " H " << c.H << " KVH " << c.KVH << " n_rot " << c.n_rot << (c.neox ? " neox" : " normal")
              << ": max |q - ref| " << dq << " (max |q| " << mq << "), K rel " << dk << ", V abs " << dv);
    CHECK(dq <= 2e-5 * mq);   // f32 sin/cos table, f32 arithmetic
    CHECK(dk <= 1.0 / 1024);  // the same value up to one f16 rounding step
    CHECK(dv <= 1.0 / 512);   // x + b in f16 (|v| < 4: at most one rounding step apart)
  }
}

namespace {

struct AttnCase {
  int D, H, KVH, n_kv, n_tok, splits;
  bool fused;
  int heads = 0;       // query heads per workgroup (0: a KV group's all)
  bool qout = false;   // the output also as B32 rows (the B32 decode; D a multiple of 32)
  bool nasty = false;  // n_kv 1 (the output is v): v with magnitude ties of either sign first, zero heads
};

// Runs the attention kernel on random (f16) K/V and checks every output
// against ref_attention. Returns the worst |out - ref|. qout: the B32 rows
// must be the CPU's quantisation of the output, word for word.
double run_attention(vk::VulkanBackend& be, const AttnCase& c, uint64_t seed) {
  const int QD = c.H * c.D, KD = c.KVH * c.D, G = c.H / c.KVH, QKV = QD + 2 * KD;
  const int cap = c.n_kv + 4, pos0 = c.n_kv - c.n_tok;
  const float scale = 1.0f / std::sqrt(float(c.D));
  const uint32_t q_off = 64, att_off = q_off + uint32_t(c.n_tok * QKV);
  const uint32_t part_off = att_off + uint32_t(c.n_tok * QD);
  const uint32_t n_part = uint32_t(c.KVH) * 128 * uint32_t(G * (c.D + 2));
  const uint32_t cnt_off = part_off + n_part;
  const uint32_t q8_off = (cnt_off + 128 * c.KVH + 67) / 4 * 4;
  const uint32_t q8_words = c.qout ? vk::MatmulKernels::b32_row_words(QD) : 0;
  SpanRig rig(be, q8_off + c.n_tok * q8_words + 64, uint64_t(cap) * KD, uint64_t(QD + 2 * KD + 2 * c.D),
              uint64_t(cap) * c.D);
  // K/V: f16 random for positions < n_kv (fused: < n_kv - 1, the last comes from the raw rows).
  auto kf = randn(size_t(cap) * KD, seed, 1.0f), vf = randn(size_t(cap) * KD, seed + 1, 1.0f);
  for (auto& e : kf) e = round_f16(e);
  for (auto& e : vf) e = round_f16(e);
  std::vector<uint32_t> kvw(size_t(cap) * KD);
  for (size_t i = 0; i < size_t(cap) * KD / 2; ++i) {
    kvw[i] = pack_half2(kf[2 * i], kf[2 * i + 1]);
    kvw[size_t(cap) * KD / 2 + i] = pack_half2(vf[2 * i], vf[2 * i + 1]);
  }
  // Positions the kernel must not read (past n_kv) and, fused, the one it
  // writes before use hold NaNs: any stray read shows in the output.
  const int first_nan = c.fused ? c.n_kv - 1 : c.n_kv;
  for (size_t i = size_t(first_nan) * KD / 2; i < size_t(cap) * KD / 2; ++i) {
    kvw[i] = 0x7E007E00u;
    kvw[size_t(cap) * KD / 2 + i] = 0x7E007E00u;
  }
  rig.put(rig.kv(), 0, kvw);
  auto qkv = randn(size_t(c.n_tok) * QKV, seed + 2, 1.0f);
  auto bv = randn(KD, seed + 5, 0.2f);
  if (c.nasty) {  // v in eighths below 1.5 (exact in f16), per KV head: ±2 ties (- first, + first) or all 0
    std::fill(bv.begin(), bv.end(), 0.0f);
    for (int t = 0; t < c.n_tok; ++t)
      for (int g = 0; g < c.KVH; ++g) {
        float* v = &qkv[size_t(t) * QKV + QD + KD + size_t(g) * c.D];
        for (int i = 0; i < c.D; ++i) v[i] = std::round(std::fmod(v[i], 1.5f) * 8.0f) / 8.0f;
        if (g % 3 == 0) v[1] = -2.0f, v[3] = 2.0f;
        if (g % 3 == 1) v[2] = 2.0f, v[c.D - 1] = -2.0f;
        if (g % 3 == 2) std::fill(v, v + c.D, 0.0f);
      }
  }
  rig.put(rig.arena(), q_off, qkv);
  const auto bq = randn(QD, seed + 3, 0.2f), bk = randn(KD, seed + 4, 0.2f);
  std::vector<float> params(bq);
  params.insert(params.end(), bk.begin(), bk.end());
  params.insert(params.end(), bv.begin(), bv.end());
  rig.put(rig.params(), 0, params);
  const auto rope = rope_table(cap, c.D, 10000.0, 1.0, nullptr);
  rig.put(rig.rope(), 0, rope);
  const uint32_t split_len = uint32_t((c.n_kv + c.splits - 1) / c.splits);
  rig.put(rig.arena(), 0,
          std::vector<uint32_t>{uint32_t(c.KVH), uint32_t(c.splits), uint32_t(c.n_tok), 0, uint32_t(pos0),
                                uint32_t(c.splits), split_len});
  SpanPush p;
  p.n_tok = c.n_tok, p.q_off = q_off, p.q_stride = QKV, p.k_off = q_off + QD, p.v_off = q_off + QD + KD;
  p.kv_cap = cap, p.att_off = att_off, p.part_off = part_off, p.cnt_off = cnt_off, p.scale = scale;
  p.n_rot = c.D, p.n_head = c.H, p.eps = 1e-6f;
  if (c.fused) p.bq_off = 0, p.bk_off = QD, p.bv_off = QD + KD;
  if (c.qout) p.q8_out = q8_off, p.q8_stride = q8_words;
  const vk::SpanKernelShape ks{uint32_t(c.D), uint32_t(G), uint32_t(c.KVH), uint32_t(c.heads)};
  rig.put(rig.arena(), 0, std::vector<uint32_t>{ks.attn_groups()});  // the indirect grid's x
  for (int rep = 0; rep < 2; ++rep) {  // twice: the arrival counters must have been reset
    rig.put(rig.kv(), 0, kvw);        // (and fused, the new position is NaN again)
    rig.run([&](VkCommandBuffer cmd) { be.span_kernels()->attention(cmd, rig.aux_set(), p, ks, c.fused, rig.arena().buffer); });
  }
  const auto out = rig.get(rig.arena(), att_off, size_t(c.n_tok) * QD);
  if (c.qout) {
    const auto q8 = rig.get_words(rig.arena(), q8_off, size_t(c.n_tok) * q8_words);
    int64_t bad = 0;
    for (int t = 0; t < c.n_tok; ++t) {
      const auto want = cpu_b32_row(&out[size_t(t) * QD], QD);
      for (uint32_t w = 0; w < q8_words; ++w) bad += q8[size_t(t) * q8_words + w] != want[w];
    }
    CHECK(bad == 0);
  }
  // The cache as the kernel left it (fused: it wrote the new position).
  const auto kv_after = rig.get_words(rig.kv(), 0, uint64_t(cap) * KD);
  auto half_at = [&](size_t idx) { return half_in(kv_after, idx); };
  double worst = 0;
  for (int t = 0; t < c.n_tok; ++t) {
    const int pos = pos0 + t, n_kv = pos + 1;
    std::vector<float> q(&qkv[size_t(t) * QKV], &qkv[size_t(t) * QKV + QD]);
    if (c.fused) {
      for (int h = 0; h < c.H; ++h)
        ref_prep_head(&q[size_t(h) * c.D], c.D, &bq[size_t(h) * c.D], nullptr, 0, rope.data(), pos, c.D, false, scale);
      for (int g = 0; g < c.KVH; ++g) {  // the new position's k, v as the kernel stores them
        std::vector<float> k(&qkv[size_t(t) * QKV + QD + size_t(g) * c.D], &qkv[size_t(t) * QKV + QD + size_t(g + 1) * c.D]);
        ref_prep_head(k.data(), c.D, &bk[size_t(g) * c.D], nullptr, 0, rope.data(), pos, c.D, false, 1.0f);
        for (int i = 0; i < c.D; ++i) {
          // Stored as f16 (one rounding step of the reference), then used as stored.
          const size_t hk = size_t(pos) * KD + size_t(g) * c.D + size_t(i);
          const float vv = qkv[size_t(t) * QKV + QD + KD + size_t(g) * c.D + i] + bv[size_t(g) * c.D + i];
          CHECK(std::fabs(half_at(hk) - k[size_t(i)]) <= std::fabs(k[size_t(i)]) / 1024 + 1e-7);
          CHECK(std::fabs(half_at(size_t(cap) * KD + hk) - vv) <= std::fabs(vv) / 1024 + 1e-7);
          kf[hk] = half_at(hk);
          vf[hk] = half_at(size_t(cap) * KD + hk);
        }
      }
    } else {
      for (auto& e : q) e *= scale;
    }
    std::vector<float> ref(static_cast<size_t>(QD));
    ref_attention(q.data(), kf.data(), vf.data(), n_kv, c.H, c.KVH, c.D, ref.data());
    worst = std::max(worst, max_diff(&out[size_t(t) * QD], ref.data(), size_t(QD)));
  }
  return worst;
}

}  // namespace

TEST_CASE("span attention kernel vs CPU: splits, tokens, head dims, groups, fused", "[vulkan][span]") {
  auto be = open_backend("span attention");
  if (!be) FISH_SKIP(skip_reason());
  const AttnCase cases[] = {
      {8, 8, 4, 1, 1, 1, false},     {8, 8, 4, 37, 1, 3, true},     {16, 4, 2, 130, 1, 1, true},
      {16, 4, 2, 130, 1, 4, false},  {32, 7, 1, 300, 1, 8, true},   {64, 4, 1, 257, 2, 5, false},
      {128, 8, 2, 700, 1, 16, true}, {128, 8, 2, 700, 1, 1, false}, {64, 8, 8, 90, 37, 1, false},
      {16, 6, 2, 75, 3, 2, false},
      // One query head per workgroup (the decode's default up to 2048 positions), and two.
      {64, 8, 2, 257, 1, 5, true, 1}, {16, 4, 1, 40, 1, 1, true, 1}, {128, 8, 2, 130, 2, 2, false, 1},
      {32, 8, 2, 75, 1, 3, true, 2},
      // B32 output rows: one split, splits (the combiner quantises), tokens,
      // one head per workgroup, G·D/4 > 128 (quantised by the workgroup, not
      // within subgroups), and with one position (the output is v itself:
      // magnitude ties of either sign and zero blocks)
      {128, 8, 2, 90, 1, 1, true, 0, true},  {128, 8, 2, 700, 1, 16, true, 0, true},
      {32, 8, 4, 40, 2, 1, false, 0, true},  {128, 8, 2, 90, 1, 4, true, 1, true},
      {256, 8, 2, 130, 1, 4, true, 0, true}, {64, 8, 2, 1, 1, 1, true, 0, true, true},
      {32, 24, 6, 1, 1, 1, true, 0, true, true},
  };
  uint64_t seed = 100;
  for (const AttnCase& c : cases) {
    const double d = run_attention(*be, c, seed);
    INFO("D " << c.D << " H " << c.H << " KVH " << c.KVH << " n_kv " << c.n_kv << " n_tok " << c.n_tok << " splits "
              << c.splits << (c.fused ? " fused" : "") << " heads/workgroup " << c.heads << (c.qout ? " B32 rows" : "")
              << ": max |out - ref| " << d);
    CHECK(d <= 2e-5 * 8);  // |v| <= ~4 (N(0,1) in f16); f32 softmax and sums
    seed += 10;
  }
}

// The prompt attention on query tiles (span_attention_tiles.comp): a chunk of
// n_tok rows of one sequence at positions pos0.. over its K/V in pages laid
// out backwards in the pool, NaN in every word it must not read, against
// ref_attention per row. The kernel's q·scale is f16 (the reference takes the
// same rounding), so what remains is its f16 probabilities: each within 2^-11
// relative, the output (a weighted mean of V rows) within 2^-10·max|v| plus
// f32 sums. Tiles as the device would choose them, and the scalar kernel with
// 16 positions per tile too. Output rows past n_tok stay untouched.
TEST_CASE("span prompt attention on query tiles vs CPU", "[vulkan][span]") {
  auto be = open_backend("span attention tiles");
  if (!be) FISH_SKIP(skip_reason());
  struct Case { int D, H, KVH, pos0, n_tok; };
  const Case cases[] = {
      {16, 4, 4, 0, 33},     // one query head per KV head: 64 tokens per tile
      {64, 32, 8, 0, 100},   // the 1B's heads
      {64, 8, 1, 190, 70},   // 8 heads per KV head, a context before the chunk
      {32, 14, 2, 5, 40},    // 7 heads per KV head: 63 rows of 64 used
      {128, 32, 8, 64, 64},  // the 8B's heads, the chunk at a page boundary
      {128, 8, 2, 300, 37},
      {48, 6, 2, 17, 45},    // three 16-dim output chunks (an odd count)
  };
  const int page = vk::Span::kKvPage;
  uint64_t seed = 900;
  for (const Case& c : cases) {
    const int QD = c.H * c.D, KD = c.KVH * c.D, n_kv = c.pos0 + c.n_tok;
    const int n_pages = (n_kv + page - 1) / page, pool = (n_pages + 1) * page;
    std::vector<uint32_t> table(static_cast<size_t>(n_pages));
    for (int i = 0; i < n_pages; ++i) table[size_t(i)] = uint32_t(n_pages - i);  // pool page 0 unused
    const size_t vhalf = size_t(pool) * KD;
    const uint32_t q_off = 64, att_off = q_off + uint32_t(c.n_tok * QD);
    SpanRig rig(*be, att_off + uint32_t((c.n_tok + 8) * QD) + 64, vhalf, 4, 4);
    rig.put(rig.page_tables(), 0, table);
    auto kf = randn(size_t(n_kv) * KD, seed, 1.0f), vf = randn(size_t(n_kv) * KD, seed + 1, 1.0f);
    std::vector<uint32_t> kvw(vhalf, 0x7E007E00u);
    double vmax = 0;
    for (int j = 0; j < n_kv; ++j)
      for (int i = 0; i < KD; i += 2) {
        const size_t e = size_t(j) * KD + size_t(i);
        for (size_t u : {e, e + 1}) kf[u] = round_f16(kf[u]), vf[u] = round_f16(vf[u]), vmax = std::max(vmax, double(std::fabs(vf[u])));
        const size_t w = (size_t(table[size_t(j / page)]) * page + size_t(j % page)) * KD / 2 + size_t(i) / 2;
        kvw[w] = pack_half2(kf[e], kf[e + 1]);
        kvw[w + vhalf / 2] = pack_half2(vf[e], vf[e + 1]);
      }
    rig.put(rig.kv(), 0, kvw);
    const auto q = randn(size_t(c.n_tok) * QD, seed + 2, 1.0f);
    rig.put(rig.arena(), q_off, q);
    rig.put(rig.arena(), 0, std::vector<uint32_t>{0, 0, 0, 0, uint32_t(c.pos0), 0, 0, 0});  // pos0, page table at 0
    const float scale = 1.0f / std::sqrt(float(c.D));
    SpanPush p;
    p.n_tok = uint32_t(c.n_tok), p.q_off = q_off, p.q_stride = uint32_t(QD), p.kv_cap = uint32_t(pool);
    p.att_off = att_off, p.scale = scale, p.n_head = uint32_t(c.H);
    vk::SpanKernelShape chosen{uint32_t(c.D), uint32_t(c.H / c.KVH), uint32_t(c.KVH)};
    be->span_kernels()->choose_tiles(chosen, be->kernels()->coopmat());
    vk::SpanKernelShape small = chosen;
    small.tile_bc = 16, small.tile_coop = false;
    if (chosen.tile_bc == 0)  // every case's heads fit the tiles: the device lacks shuffles or shared memory
      FISH_SKIP("span attention tiles: no query-tile form on " + be->device()->info().name);
    // Variants: the chosen tiles, the scalar 16-position form, and the chosen
    // tiles writing f16 rows (HALF: wo's x on the coopmat prefill).
    for (int variant = 0; variant < 3; ++variant) {
      const vk::SpanKernelShape& ks = variant == 1 ? small : chosen;
      const bool half = variant == 2;
      if (variant == 1 && chosen.tile_bc == 16 && !chosen.tile_coop) continue;  // the same kernel again
      const std::vector<float> sentinel(size_t(c.n_tok + 8) * QD, 7.0f);
      rig.put(rig.arena(), att_off, sentinel);
      rig.run([&](VkCommandBuffer cmd) { be->span_kernels()->attention_tiles(cmd, rig.aux_set(), p, ks, half); });
      auto out = rig.get(rig.arena(), att_off, size_t(c.n_tok + 8) * QD);
      if (half) {  // the rows as halves, every word after them untouched (then the sentinel rows as before)
        const size_t rows = size_t(c.n_tok) * QD;
        int64_t stray = 0;
        for (size_t i = rows / 2; i < out.size(); ++i) stray += out[i] != 7.0f;
        CHECK(stray == 0);
        const auto h = unpack_halves(out, rows);
        std::copy(h.begin(), h.end(), out.begin());
      }
      double worst = 0;
      for (int t = 0; t < c.n_tok; ++t) {
        std::vector<float> qs(&q[size_t(t) * QD], &q[size_t(t + 1) * QD]);
        for (auto& e : qs) e = round_f16(e * scale);
        std::vector<float> ref(static_cast<size_t>(QD));
        ref_attention(qs.data(), kf.data(), vf.data(), c.pos0 + t + 1, c.H, c.KVH, c.D, ref.data());
        worst = std::max(worst, max_diff(&out[size_t(t) * QD], ref.data(), size_t(QD)));
      }
      int64_t touched = 0;
      for (size_t i = size_t(c.n_tok) * QD; i < out.size(); ++i) touched += out[i] != 7.0f;
      INFO("D " << c.D << " H " << c.H << " KVH " << c.KVH << " pos0 " << c.pos0 << " n_tok " << c.n_tok << ", "
                << (ks.tile_coop ? "coopmat" : "scalar") << " BC " << ks.tile_bc << (half ? " f16 rows" : "")
                << ": max |out - ref| " << worst << " (max |v| " << vmax << ")");
      // f16 rows: one more rounding, 2^-11 of |out| <= max |v|.
      CHECK(worst <= std::ldexp(vmax, -10) + (half ? std::ldexp(vmax, -11) : 0.0) + 1e-5);
      CHECK(touched == 0);
    }
    seed += 10;
  }
}

// Rows of several sequences (span_rope_store / span_attention MULTI): each
// row's position and page table come from the row table. Three sequences'
// pages scattered over one KV pool (sequence 1's 141 positions in pages 2, 7,
// 0), every position a row may not read NaN (the other sequences' pages and
// free ones, its own past the row): the RoPE / KV store writes each row's k
// and v at its sequence's position and nowhere else, and each row's attention
// sees exactly its own sequence's positions 0..p (a later row of the same
// sequence also the position an earlier row stored), across page boundaries.
TEST_CASE("span RoPE / KV store and attention over rows of several sequences vs CPU", "[vulkan][span][seq]") {
  auto be = open_backend("span rows of several sequences");
  if (!be) FISH_SKIP(skip_reason());
  const int D = 32, H = 8, KVH = 2, QD = H * D, KD = KVH * D, QKV = QD + 2 * KD, S = 3, cap = 160;
  const int page = vk::Span::kKvPage, pool_pages = 8, pool = pool_pages * page;  // pool rows
  const std::vector<uint32_t> tables[S] = {{5}, {2, 7, 0}, {4, 1}};  // at page-table word 8·q
  auto row_of = [&](int q, int j) { return size_t(tables[q][size_t(j / page)]) * page + size_t(j % page); };
  const size_t vhalf = size_t(pool) * KD;  // halves before V
  // Rows: (sequence, position); sequence s holds positions < filled[s] before the forward.
  const int row_seq[4] = {1, 0, 2, 1}, row_pos[4] = {139, 4, 70, 140}, filled[S] = {4, 139, 70};
  const int n_tok = 4;
  const uint32_t meta_off = 64, qkv_off = 128, qr_off = qkv_off + uint32_t(n_tok * QKV);
  const uint32_t att_off = qr_off + uint32_t(n_tok * QD), part_off = att_off + uint32_t(n_tok * QD);
  const uint32_t cnt_off = part_off + uint32_t(KVH) * 128 * uint32_t((H / KVH) * (D + 2));
  SpanRig rig(*be, cnt_off + 128 * KVH + 64, vhalf, 4, uint64_t(cap) * D);
  for (int q = 0; q < S; ++q) rig.put(rig.page_tables(), 8 * uint64_t(q), tables[q]);
  // K/V: f16 random where a row may read it, NaN elsewhere.
  std::vector<float> kf(size_t(S) * cap * KD), vf(kf.size());  // [s][pos][KD] as f32
  std::vector<uint32_t> kvw(vhalf, 0x7E007E00u);                // the pool: K halves then V halves
  const auto rk = randn(kf.size(), 501, 1.0f), rv = randn(kf.size(), 502, 1.0f);
  for (int q = 0; q < S; ++q)
    for (int j = 0; j < filled[q] * KD; j += 2) {
      const size_t i = size_t(q) * size_t(cap) * KD + size_t(j);
      kf[i] = round_f16(rk[i]), kf[i + 1] = round_f16(rk[i + 1]);
      vf[i] = round_f16(rv[i]), vf[i + 1] = round_f16(rv[i + 1]);
      const size_t w = (row_of(q, j / KD) * KD + size_t(j % KD)) / 2;
      kvw[w] = pack_half2(kf[i], kf[i + 1]);
      kvw[w + vhalf / 2] = pack_half2(vf[i], vf[i + 1]);
    }
  const auto qkv = randn(size_t(n_tok) * QKV, 503, 1.0f);
  const auto rope = rope_table(cap, D, 10000.0, 1.0, nullptr);
  rig.put(rig.arena(), qkv_off, qkv);
  rig.put(rig.rope(), 0, rope);
  std::vector<uint32_t> meta;
  for (int t = 0; t < n_tok; ++t) meta.push_back(uint32_t(row_pos[t])), meta.push_back(8 * uint32_t(row_seq[t]));
  rig.put(rig.arena(), meta_off, meta);
  const float scale = 1.0f / std::sqrt(float(D));
  for (const int heads : {0, 1})      // a KV group per workgroup, one query head
    for (const int splits : {1, 4}) {  // a split past a short row's position is empty
      rig.put(rig.kv(), 0, kvw);
      SpanPush p;
      p.n_tok = n_tok, p.q_off = qkv_off, p.q_stride = QKV, p.k_off = qkv_off + QD, p.v_off = qkv_off + QD + KD;
      p.qr_off = qr_off, p.kv_cap = uint32_t(pool), p.eps = 1e-6f, p.n_rot = D, p.n_head = H, p.meta_off = meta_off;
      p.att_off = att_off, p.part_off = part_off, p.cnt_off = cnt_off, p.scale = scale;
      const vk::SpanKernelShape ks{uint32_t(D), uint32_t(H / KVH), uint32_t(KVH), uint32_t(heads)};
      const uint32_t n_kv = 141, split_len = (n_kv + uint32_t(splits) - 1) / uint32_t(splits);
      rig.put(rig.arena(), 0,
              std::vector<uint32_t>{ks.attn_groups(), uint32_t(splits), uint32_t(n_tok), 0, 0, uint32_t(splits), split_len});
      rig.run([&](VkCommandBuffer cmd) { be->span_kernels()->rope_store(cmd, rig.aux_set(), p, ks, true); });
      SpanPush a = p;
      a.q_off = qr_off, a.q_stride = QD;
      rig.run([&](VkCommandBuffer cmd) {
        be->span_kernels()->attention(cmd, rig.aux_set(), a, ks, false, rig.arena().buffer, true);
      });
      // The KV: each row's position of its sequence written (one f16 step from
      // the reference's k, v), every other word as it was.
      const auto after = rig.get_words(rig.kv(), 0, vhalf);
      auto half_at = [&](size_t idx) { return half_in(after, idx); };
      std::vector<float> ks_f = kf, vs_f = vf;
      std::vector<uint8_t> written(after.size(), 0);
      double dk = 0;
      for (int t = 0; t < n_tok; ++t)
        for (int g = 0; g < KVH; ++g) {
          std::vector<float> k(&qkv[size_t(t) * QKV + QD + size_t(g) * D], &qkv[size_t(t) * QKV + QD + size_t(g + 1) * D]);
          ref_prep_head(k.data(), D, nullptr, nullptr, 0, rope.data(), row_pos[t], D, false, 1.0f);
          for (int i = 0; i < D; ++i) {
            const size_t e = size_t(row_seq[t]) * size_t(cap) * KD + size_t(row_pos[t]) * KD + size_t(g) * D + size_t(i);
            const size_t hk = row_of(row_seq[t], row_pos[t]) * KD + size_t(g) * D + size_t(i);
            const float vv = qkv[size_t(t) * QKV + QD + KD + size_t(g) * D + i];
            dk = std::max(dk, double(std::fabs(half_at(hk) - k[size_t(i)])) / std::max(1e-3f, std::fabs(k[size_t(i)])));
            CHECK(std::fabs(half_at(hk + vhalf) - vv) <= std::fabs(vv) / 1024 + 1e-7);
            ks_f[e] = half_at(hk), vs_f[e] = half_at(hk + vhalf);
            written[hk / 2] = written[(hk + vhalf) / 2] = 1;
          }
        }
      CHECK(dk <= 1.0 / 1024);
      int64_t stray = 0;
      for (size_t w = 0; w < after.size(); ++w) stray += !written[w] && after[w] != kvw[w];
      CHECK(stray == 0);
      // The attention of each row over its own sequence's positions 0..p.
      const auto out = rig.get(rig.arena(), att_off, size_t(n_tok) * QD);
      double worst = 0;
      for (int t = 0; t < n_tok; ++t) {
        std::vector<float> q(&qkv[size_t(t) * QKV], &qkv[size_t(t) * QKV + QD]);
        for (int h = 0; h < H; ++h) ref_prep_head(&q[size_t(h) * D], D, nullptr, nullptr, 0, rope.data(), row_pos[t], D, false, scale);
        const size_t base = size_t(row_seq[t]) * size_t(cap) * KD;
        std::vector<float> ref(static_cast<size_t>(QD));
        ref_attention(q.data(), &ks_f[base], &vs_f[base], row_pos[t] + 1, H, KVH, D, ref.data());
        worst = std::max(worst, max_diff(&out[size_t(t) * QD], ref.data(), size_t(QD)));
      }
      INFO("heads/workgroup " << heads << ", splits " << splits << ": max |out - ref| " << worst << ", K rel " << dk);
      CHECK(worst <= 2e-5 * 8);  // as the one-sequence attention cases
    }
}

namespace {

// The span matmul variants on one weight: y = f(s_t · W · x'), x' = x or x·x2
// (xprod), s_t a per-token scale read from the arena (the producer's 1/rms);
// f = store / add into y0 / silu / add + the next norm (EPI 3: also x·g of the
// new y and its Σy² partials per row group) / y0 · the product (EPI 4, tiled). Returns the worst |err| / bound with the
// spec's bound 1e-3 · Σ|w||x'| / n_out on the product (silu: its slope is
// below 1.1, so the bound carries over); EPI 3's extras are checked here.
// fz.xh: x goes in as f16 rows (the reference takes the same rounded x);
// fz.oh: y · product comes back as f16 rows from a region of its own.
double run_span_matmul(vk::VulkanBackend& be, const Matrix& m, int n_tok, vk::SpanFusion fz, bool scaled, uint64_t seed) {
  const uint32_t n_in = uint32_t(m.n_in), n_out = uint32_t(m.n_out);
  const uint32_t inv_off = 16, x_off = 64, x2_off = x_off + n_tok * n_in, y_off = x2_off + n_tok * n_in;
  const uint32_t xg_off = y_off + n_tok * n_out, sq_off = xg_off + n_tok * n_out;
  const uint32_t oh_off = sq_off + 4 * n_out;  // OH: n_tok · n_out halves
  SpanRig rig(be, oh_off + n_tok * n_out + 64, 4, n_out, 4);
  auto x = randn(size_t(n_tok) * n_in, seed, 2.0f);
  const auto x2 = randn(size_t(n_tok) * n_in, seed + 1);
  auto y0 = randn(size_t(n_tok) * n_out, seed + 3);
  const auto g = uniform(n_out, seed + 2, 0.7f, 1.3f);
  const auto sc = uniform(4, seed + 4, 0.7f, 1.3f);
  rig.put(rig.arena(), inv_off, sc);
  if (fz.xh) {  // f16 rows, two halves per word
    std::vector<uint32_t> words(x.size() / 2);
    for (size_t i = 0; i < words.size(); ++i) words[i] = pack_half2(x[2 * i], x[2 * i + 1]);
    for (auto& e : x) e = round_f16(e);
    rig.put(rig.arena(), x_off, words);
  } else {
    rig.put(rig.arena(), x_off, x);
  }
  if (fz.oh)  // y0 away from 0: y / y0 keeps the product's f16 rounding, not a subnormal's
    for (auto& e : y0) e = std::copysign(0.5f + std::fabs(e), e);
  rig.put(rig.arena(), x2_off, x2);
  rig.put(rig.arena(), y_off, y0);
  rig.put(rig.params(), 0, g);
  vk::Weight* w = be.upload(upload_desc(m));
  REQUIRE(w);
  REQUIRE(w->chunks.size() == 1);
  const vk::WeightChunk& ch = w->chunks[0];
  vk::SpanMatmulPush pc;
  pc.m = {n_in, ch.rows, uint32_t(n_tok), n_in, x_off, n_out, y_off};
  pc.inv_in = scaled ? inv_off : vk::kNone, pc.eps = 1e-5f, pc.x2_off = x2_off;
  pc.norm_off = 0, pc.xg_off = fz.oh ? 2 * oh_off - y_off : xg_off, pc.sq_off = sq_off;
  const VkDescriptorSet set = rig.matmul_set(ch);
  rig.run([&](VkCommandBuffer cmd) { be.kernels()->record_span(cmd, *w->type, set, pc, fz); });
  const uint32_t groups = be.kernels()->span_row_groups(*w->type, n_in, n_out, uint32_t(n_tok), fz);
  auto y = rig.get(rig.arena(), y_off, size_t(n_tok) * n_out);
  if (fz.oh) {  // y itself keeps silu(gate); the product's rows are the halves
    CHECK(std::equal(y0.begin(), y0.end(), y.begin()));
    y = unpack_halves(rig.get(rig.arena(), oh_off, size_t(n_tok) * n_out / 2), y.size());
  }
  REQUIRE(be.release(w));
  std::vector<float> xe(x);
  if (fz.xprod)
    for (size_t i = 0; i < xe.size(); ++i) xe[i] *= x2[i];
  WeightView v;
  v.type = m.type, v.data = m.data.data(), v.n_in = m.n_in, v.n_out = m.n_out, v.row_bytes = m.row_bytes;
  std::vector<float> ref(y.size());
  matmul_ref_f32(v, xe.data(), n_tok, ref.data());
  // Turn y back into "the product" (unscaled) so bound_ratio can judge it.
  std::vector<float> prod(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const float s = scaled ? sc[i / n_out] : 1.0f;
    if (fz.epi == 1 || fz.epi == 3) prod[i] = (y[i] - y0[i]) / s;
    else if (fz.epi == 4) prod[i] = y[i] / y0[i] / s;  // one rounding of the product (f32, or f16 with OH): within the bound's slack
    else if (fz.epi == 2) {
      const float r = ref[i] * s, si = r / (1.0f + std::exp(-r));
      prod[i] = ref[i] + (y[i] - si) / 1.1f / s;
    } else prod[i] = y[i] / s;
  }
  int64_t bad = 0;
  // The tensor-core prefill (f16 products) is held to its own bound, as in
  // test_vk_kernels' [coopmat] case: 3e-3 instead of 1e-3.
  const double rel = be.kernels()->coopmat_for(uint32_t(n_tok)) && !fz.int8 ? 3e-3 : 1e-3;
  const double ratio = bound_ratio(m, xe.data(), n_tok, prod.data(), &bad, rel);
  CHECK(bad == 0);
  if (fz.epi == 3) {
    const auto xg = rig.get(rig.arena(), xg_off, size_t(n_tok) * n_out);
    const auto sq = rig.get(rig.arena(), sq_off, size_t(n_tok) * groups);
    for (int t = 0; t < n_tok; ++t) {
      double ss = 0, parts = 0;
      for (uint32_t r = 0; r < n_out; ++r) {
        const float yr = y[size_t(t) * n_out + r];
        ss += double(yr) * yr;
        CHECK(std::fabs(xg[size_t(t) * n_out + r] - yr * g[r]) <= 1e-6f * std::fabs(yr * g[r]) + 1e-30f);
      }
      for (uint32_t k = 0; k < groups; ++k) parts += sq[size_t(t) * groups + k];
      INFO("token " << t << ": Σy² from " << groups << " partials " << parts << ", expected " << ss);
      CHECK(std::fabs(parts - ss) <= 1e-5 * ss);
    }
  }
  return ratio;
}

}  // namespace

namespace {

// The span matmul variants over the types, both row counts and 1..37 tokens
// (run_span_matmul). halves: the coopmat prefill's f16 rows in (xh) and out
// (oh) at 37 tokens, else the other fusions; the coopmat kernel (37 tokens
// on a device with cooperative matrices) at each tile width, NARROW 32, 64 and
// WIDE 128 tokens.
void check_span_variants(vk::VulkanBackend& be, bool halves) {
  uint64_t seed = halves ? 700 : 500;
  const auto half_rows = [](uint32_t epi, bool oh) {
    vk::SpanFusion f{epi, false};
    f.xh = true, f.oh = oh;
    return f;
  };
  const std::vector<vk::SpanFusion> fusions =
      halves ? std::vector<vk::SpanFusion>{half_rows(0, false), half_rows(1, false), half_rows(2, false),
                                           half_rows(4, false), half_rows(4, true)}
             : std::vector<vk::SpanFusion>{{0, false}, {2, false}, {1, false}, {1, true}, {0, true},
                                           {3, false}, {3, true},  {4, false}};
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::FQ3}) {
    const int64_t n_in = (t == GgmlType::F32 || t == GgmlType::F16) ? 200 : 512;
    double worst = 0;
    for (int64_t n_out : {70, 1100}) {  // one row per workgroup, and two
      const Matrix m = random_matrix(t, n_in, n_out, seed++);
      for (int n_tok : {1, 2, 4, 37}) {
        for (const vk::SpanFusion& fz : fusions) {
          if (n_tok > 4 && fz.epi == 3) continue;  // the norm epilogue is the matvec's (decode)
          if (n_tok <= 4 && fz.epi == 4) continue;  // y = y · v is the tiled kernels' (prefill)
          if (fz.xh && n_tok <= 4) continue;        // f16 rows: prefill on cooperative matrices
          if (n_out > 70 && n_tok > 1 && n_tok < 37) continue;
          // The epilogues and x·x2 are one code for every type (each type's is its unit
          // decode): every fusion on Q4_K, the plain store and the norm epilogue on the others.
          if (t != GgmlType::Q4_K && !(fz.epi == 0 && !fz.xprod) && !(fz.epi == 3 && fz.xprod)) continue;
          const bool scaled = n_tok <= 4;
          const bool coop = n_tok > 4 && be.kernels()->coopmat();
          for (uint32_t bn : {32u, 64u, 128u}) {
            if (!coop && bn != 64) continue;
            if (coop) be.kernels()->set_coop_tokens(bn);
            const double r = run_span_matmul(be, m, n_tok, fz, scaled, seed++);
            INFO(type_name(t) << " " << n_out << " rows, n_tok " << n_tok << " epi " << fz.epi << " xprod " << fz.xprod
                              << " f16 x " << fz.xh << " f16 out " << fz.oh << (coop ? ", tiles of " : "")
                              << (coop ? std::to_string(bn) : "") << ": worst |err|/bound " << r);
            CHECK(r <= 1.0);
            worst = std::max(worst, r);
          }
          be.kernels()->set_coop_tokens(0);
        }
      }
    }
    std::printf("  span matmul%s %-5s worst |err|/bound %.5f\n", halves ? " (f16 rows)" : "", type_name(t).c_str(),
                worst);
  }
}

}  // namespace

TEST_CASE("span matvec / tiled variants: scaled x, add, silu, x·x2, norm epilogue", "[vulkan][span]") {
  auto be = open_backend("span matmul variants");
  if (!be) FISH_SKIP(skip_reason());
  check_span_variants(*be, false);
}

TEST_CASE("span coopmat prefill on f16 rows in and out (XH, OH), every tile width", "[vulkan][span][coopmat]") {
  auto be = open_backend("span matmul f16 rows");
  if (!be) FISH_SKIP(skip_reason());
  if (!be->kernels()->coopmat())
    FISH_SKIP("f16 rows are the coopmat prefill's; no cooperative matrices on " + be->device()->info().name);
  check_span_variants(*be, true);
}

// The coopmat loader's weight decode (shaders/dequant_seg_f16.glsl) through
// its check module segf16_<T> (no cooperative matrices needed): every lane's
// 32 halves of every 64-element segment against the CPU's dequant_row, within
// 2^-10 of the value plus 2^-10 of the largest |w| of its 32-element group
// (the product c · sc · d is rounded once more where the f16 fma rounds its
// product; a wrong nibble, scale or group is off by a quantisation step,
// >= 1/63 of the group's largest) plus an f16 subnormal step; F16 rows come
// back exact. The halves are in tile order (0, 2, 1, 3 within each 4);
// elements past n_in are 0. The random rows include blocks whose d is an f16
// subnormal (the decode's operands must not be). Both forms of c · sc / 1024
// (FUSED_F16 off: two operations, every device; on: one fma, checked where
// MatmulKernels::fused_f16 says the coopmat kernels run it).
TEST_CASE("coopmat loader's f16 weight decode (segf16_<T>) = dequant_row, every type", "[vulkan][span]") {
  auto be = open_backend("coopmat loader decode");
  if (!be) FISH_SKIP(skip_reason());
  if (!be->device()->caps().shader_float16) FISH_SKIP("no 16-bit arithmetic on " + be->device()->info().name);
  const vk::Layout& lay = be->kernels()->span_layout();
  const vk::DeviceFns& f = be->device()->fns();
  uint64_t seed = 900;
  const std::vector<std::pair<GgmlType, std::vector<int64_t>>> cases = {
      {GgmlType::F32, {200, 256}}, {GgmlType::F16, {256, 200}}, {GgmlType::Q4_0, {96, 224}},
      {GgmlType::Q8_0, {96, 224}}, {GgmlType::Q4_K, {512}},     {GgmlType::Q5_K, {512}},
      {GgmlType::Q6_K, {512}},     {GgmlType::FQ3, {512}}};
  for (const auto& [t, widths] : cases) {
    for (uint32_t fused : {0u, 1u}) {
      if (fused && !be->kernels()->fused_f16()) continue;  // the form this device's coopmat kernels run
      double worst = 0;
      for (int64_t n_in : widths) {
        const uint32_t n_out = 37, n_seg = uint32_t((n_in + 63) / 64), lanes = n_out * n_seg * 2;
        const Matrix m = random_matrix(t, n_in, n_out, seed++);
        vk::Weight* w = be->upload(upload_desc(m));
        REQUIRE(w);
        REQUIRE(w->chunks.size() == 1);
        const uint32_t y_off = 64;
        SpanRig rig(*be, y_off + 16 * lanes + 64, 4, 4, 4);
        rig.put(rig.arena(), y_off, std::vector<uint32_t>(16 * lanes, 0xFFFFFFFFu));  // NaN halves: unwritten shows
        vk::SpanMatmulPush pc;
        pc.m = {uint32_t(n_in), n_out, 1, uint32_t(n_in), 0, 0, y_off};
        const VkPipeline pipe = be->pipelines()->get("segf16_" + type_name(t), lay, {0, 0, 0, 0, 0, 0, fused});
        REQUIRE(pipe != VK_NULL_HANDLE);
        const VkDescriptorSet set = rig.matmul_set(w->chunks[0]);
        rig.run([&](VkCommandBuffer cmd) {
          f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
          f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, lay.pipeline_layout, 0, 1, &set, 0, nullptr);
          f.vkCmdPushConstants(cmd, lay.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
          f.vkCmdDispatch(cmd, (lanes + 63) / 64, 1, 1);
        });
        const auto words = rig.get_words(rig.arena(), y_off, 16 * size_t(lanes));
        REQUIRE(be->release(w));
        std::vector<float> ref(static_cast<size_t>(n_in));
        int64_t bad = 0;
        for (uint32_t r = 0; r < n_out; ++r) {
          dequant_row(t, m.data.data() + uint64_t(r) * m.row_bytes, ref.data(), n_in);
          for (uint32_t s = 0; s < n_seg; ++s)
            for (uint32_t h = 0; h < 2; ++h)
              for (uint32_t q = 0; q < 32; ++q) {
                // Half q of the lane: a (q < 16) = k + 16h + q, b = k + 32 + 16h + q - 16; tile order within 4.
                const uint32_t j = q & ~3u, within = (q & 3u) == 1 ? 2 : (q & 3u) == 2 ? 1 : (q & 3u);
                const int64_t e = 64 * int64_t(s) + (q < 16 ? 16 * h + j + within : 32 + 16 * h + j - 16 + within);
                const size_t lane = (size_t(r) * n_seg + s) * 2 + h;
                const float got = half_in(words, 32 * lane + q);
                const float want = e < n_in ? ref[size_t(e)] : 0.0f;
                double gmax = 0;
                for (int64_t i = e / 32 * 32; i < std::min<int64_t>(e / 32 * 32 + 32, n_in); ++i)
                  gmax = std::max(gmax, std::fabs(double(ref[size_t(i)])));
                const double tol = t == GgmlType::F16 ? 0.0
                                                      : std::ldexp(std::fabs(double(want)) + gmax, -10) + std::ldexp(1.0, -24);
                const double err = std::fabs(double(got) - double(want));
                if (!(err <= tol)) {
                  if (bad++ < 5)
                    UNSCOPED_INFO(type_name(t) << " " << n_out << "x" << n_in << (fused ? " fused" : "") << " row " << r
                                               << " element " << e << ": " << got << ", expected " << want);
                } else if (gmax > 0) {
                  worst = std::max(worst, err / gmax);
                }
              }
        }
        CHECK(bad == 0);
      }
      std::printf("  %-5s%s worst |err| / group max %.3g\n", type_name(t).c_str(), fused ? " (fused)" : "", worst);
    }
  }
}
