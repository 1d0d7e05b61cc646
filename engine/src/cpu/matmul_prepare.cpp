// prepare_weight: the load-time repack of Q4_K / Q6_K matrices into 16-row
// strips (layout in cpu/matmul_strips.h), its exact inverse for one row
// (weight_row_gguf: the scalar fallback and the f32 reference read strips
// through it), and the owned, 2 MiB-aligned storage of a prepared weight
// (transparent huge pages where the kernel allows: a 800 MB model read once
// per token otherwise walks ~200k page-table entries).
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "cpu/matmul.h"
#include "cpu/matmul_kernels.h"
#include "cpu/matmul_strips.h"
#include "cpu/thread_pool.h"

namespace fish {

namespace {

using mm::kStripRows;
using mm::Q4KStrip;
using mm::Q6KStrip;

// ---- Q4_K ----

inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// rows[i]: GGUF block b of row i of the strip, or null (a padding row: zeros).
// Quad (j, q) of a row is elements 32j + 4q .. + 3 (low nibbles) and
// 32j + 16 + 4q .. + 3 (high nibbles); in GGUF those are 4 consecutive qs
// bytes each, at 32 (j / 2) + 4q and + 16, in the low nibbles for even j and
// the high nibbles for odd j. (Word operations: 4 elements at a time.)
void pack_q4k(const uint8_t* const* rows, uint8_t* out) {
  constexpr uint32_t kLo = 0x0F0F0F0Fu;
  for (int i = 0; i < kStripRows; ++i) {
    if (!rows[i]) {
      for (uint64_t o : {Q4KStrip::kD, Q4KStrip::kDmin}) std::memset(out + o + 2 * i, 0, 2);
      for (int p = 0; p < 3; ++p) store32(out + Q4KStrip::kScales + 64 * p + 4 * i, 0);
      for (int k = 0; k < 32; ++k) store32(out + Q4KStrip::kQs + 64 * k + 4 * i, 0);
      continue;
    }
    const auto* b = reinterpret_cast<const BlockQ4_K*>(rows[i]);
    std::memcpy(out + Q4KStrip::kD + 2 * i, &b->d, 2);
    std::memcpy(out + Q4KStrip::kDmin + 2 * i, &b->dmin, 2);
    for (int p = 0; p < 3; ++p) std::memcpy(out + Q4KStrip::kScales + 64 * p + 4 * i, b->scales + 4 * p, 4);
    for (int j = 0; j < 8; ++j)
      for (int q = 0; q < 4; ++q) {
        const uint32_t lo = load32(b->qs + 32 * (j / 2) + 4 * q), hi = load32(b->qs + 32 * (j / 2) + 16 + 4 * q);
        const uint32_t v = j % 2 == 0 ? (lo & kLo) | (hi & kLo) << 4 : (lo >> 4 & kLo) | (hi & ~kLo);
        store32(out + Q4KStrip::kQs + 64 * (4 * j + q) + 4 * i, v);
      }
  }
}

void unpack_q4k(const uint8_t* in, int i, uint8_t* block) {
  BlockQ4_K b{};
  std::memcpy(&b.d, in + Q4KStrip::kD + 2 * i, 2);
  std::memcpy(&b.dmin, in + Q4KStrip::kDmin + 2 * i, 2);
  for (int p = 0; p < 3; ++p) std::memcpy(b.scales + 4 * p, in + Q4KStrip::kScales + 64 * p + 4 * i, 4);
  for (int k = 0; k < 32; ++k) {
    const int j = k / 4, q = k % 4;
    for (int c = 0; c < 4; ++c) {
      const uint8_t v = in[Q4KStrip::kQs + 64 * k + 4 * i + c];
      const int e_lo = 32 * j + 4 * q + c, e_hi = e_lo + 16;
      b.qs[mm::q4k_nibble_index(e_lo)] |= uint8_t((v & 15) << mm::q4k_nibble_shift(e_lo));
      b.qs[mm::q4k_nibble_index(e_hi)] |= uint8_t((v >> 4) << mm::q4k_nibble_shift(e_hi));
    }
  }
  std::memcpy(block, &b, sizeof b);
}

// ---- Q6_K ----

// Quad u of 16-group g (elements 16g + 4u .. + 3) lies in one 32-run of the
// GGUF block: 4 consecutive ql bytes (one nibble each) and 4 consecutive qh
// bytes (2 bits each).
void pack_q6k(const uint8_t* const* rows, uint8_t* out) {
  for (int i = 0; i < kStripRows; ++i) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(rows[i]);
    if (b) std::memcpy(out + Q6KStrip::kD + 2 * i, &b->d, 2);
    else std::memset(out + Q6KStrip::kD + 2 * i, 0, 2);
    for (int g = 0; g < 16; ++g) out[Q6KStrip::kScales + 16 * g + i] = b ? uint8_t(b->scales[g]) : 0;
    for (int g = 0; g < 16; ++g) {
      uint32_t ql[2] = {0, 0}, qh = 0;
      for (int u = 0; b && u < 4; ++u) {
        const int e = 16 * g + 4 * u;
        const uint32_t lo = load32(b->ql + mm::q6k_ql_index(e)) >> mm::q6k_ql_shift(e) & 0x0F0F0F0Fu;
        const uint32_t hi = load32(b->qh + mm::q6k_qh_index(e)) >> mm::q6k_qh_shift(e) & 0x03030303u;
        ql[u / 2] |= lo << (4 * (u % 2));
        qh |= hi << (2 * u);
      }
      store32(out + Q6KStrip::kQl + 64 * (2 * g) + 4 * i, ql[0]);
      store32(out + Q6KStrip::kQl + 64 * (2 * g + 1) + 4 * i, ql[1]);
      store32(out + Q6KStrip::kQh + 64 * g + 4 * i, qh);
    }
  }
}

void unpack_q6k(const uint8_t* in, int i, uint8_t* block) {
  BlockQ6_K b{};
  std::memcpy(&b.d, in + Q6KStrip::kD + 2 * i, 2);
  for (int g = 0; g < 16; ++g) b.scales[g] = int8_t(in[Q6KStrip::kScales + 16 * g + i]);
  for (int g = 0; g < 16; ++g)
    for (int u = 0; u < 4; ++u)
      for (int c = 0; c < 4; ++c) {
        const int e = 16 * g + 4 * u + c;
        const int lo = (in[Q6KStrip::kQl + 64 * (2 * g + u / 2) + 4 * i + c] >> (4 * (u % 2))) & 15;
        const int hi = (in[Q6KStrip::kQh + 64 * g + 4 * i + c] >> (2 * u)) & 3;
        b.ql[mm::q6k_ql_index(e)] |= uint8_t(lo << mm::q6k_ql_shift(e));
        b.qh[mm::q6k_qh_index(e)] |= uint8_t(hi << mm::q6k_qh_shift(e));
      }
  std::memcpy(block, &b, sizeof b);
}

struct StripCodec {
  uint64_t block_bytes;  // one row's GGUF block
  void (*pack)(const uint8_t* const* rows, uint8_t* out);
  void (*unpack)(const uint8_t* in, int i, uint8_t* block);
};

const StripCodec* codec_of(GgmlType t) {
  static const StripCodec q4{sizeof(BlockQ4_K), pack_q4k, unpack_q4k};
  static const StripCodec q6{sizeof(BlockQ6_K), pack_q6k, unpack_q6k};
  return t == GgmlType::Q4_K ? &q4 : t == GgmlType::Q6_K ? &q6 : nullptr;
}

uint64_t gguf_row_bytes(const WeightView& w) {
  const auto info = ggml_type_info(w.type);
  return uint64_t(w.n_in / info->block_size) * uint64_t(info->type_size);
}

}  // namespace

void PreparedWeight::Free::operator()(uint8_t* p) const { std::free(p); }

PreparedWeight prepare_weight(const WeightView& w, ThreadPool* pool) {
  PreparedWeight out;
  out.view_ = w;
  if (w.layout != WeightLayout::Gguf)
    throw Error("prepare_weight: the weight is already prepared (layout " + std::to_string(int(w.layout)) + ")");
  const StripCodec* codec = codec_of(w.type);
  if (!codec || !mm::active_family_has_strips() || w.n_out <= 0) return out;
  if (w.n_in <= 0 || w.n_in % QK_K != 0)
    throw Error("prepare_weight: n_in " + std::to_string(w.n_in) + " is not a positive multiple of " +
                std::to_string(QK_K));
  const uint64_t rb = gguf_row_bytes(w);
  if (w.row_bytes < rb)
    throw Error("prepare_weight: row_bytes " + std::to_string(w.row_bytes) + " is less than the " +
                std::to_string(rb) + " bytes of a " + ggml_type_name(w.type) + " row of " + std::to_string(w.n_in));
  if (!w.data) throw Error("prepare_weight: weight data is null");

  const int64_t n_strips = (w.n_out + kStripRows - 1) / kStripRows;
  const int64_t n_blocks = w.n_in / QK_K;
  const uint64_t strip_bytes = rb * kStripRows;
  const uint64_t bytes = strip_bytes * uint64_t(n_strips);
  constexpr uint64_t kHuge = 2u << 20;
  const uint64_t alloc = (bytes + kHuge - 1) / kHuge * kHuge;
  auto* mem = static_cast<uint8_t*>(std::aligned_alloc(kHuge, alloc));
  if (!mem) throw Error("prepare_weight: cannot allocate " + std::to_string(alloc) + " bytes");
  out.owned_.reset(mem);
  madvise(mem, alloc, MADV_HUGEPAGE);  // advice only: without it the pages are 4 KiB

  const auto* src = static_cast<const uint8_t*>(w.data);
  auto pack_strips = [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* rows[kStripRows];
        for (int i = 0; i < kStripRows; ++i) {
          const int64_t r = s * kStripRows + i;
          rows[i] = r < w.n_out ? src + uint64_t(r) * w.row_bytes + uint64_t(b) * codec->block_bytes : nullptr;
        }
        codec->pack(rows, mem + uint64_t(s) * strip_bytes + uint64_t(b) * codec->block_bytes * kStripRows);
      }
  };
  if (pool) pool->parallel_for(n_strips, 8, [&](int64_t s0, int64_t s1, int) { pack_strips(s0, s1); });
  else pack_strips(0, n_strips);

  out.view_.data = mem;
  out.view_.row_bytes = rb;
  out.view_.layout = WeightLayout::Strips16;
  out.owned_bytes_ = alloc;
  return out;
}

void weight_row_gguf(const WeightView& w, int64_t r, uint8_t* out) {
  if (r < 0 || r >= w.n_out)
    throw Error("weight_row_gguf: row " + std::to_string(r) + " is outside the " + std::to_string(w.n_out) + " rows");
  const auto* src = static_cast<const uint8_t*>(w.data);
  if (w.layout == WeightLayout::Gguf) {
    std::memcpy(out, src + uint64_t(r) * w.row_bytes, gguf_row_bytes(w));
    return;
  }
  const StripCodec* codec = codec_of(w.type);
  if (w.layout != WeightLayout::Strips16 || !codec)
    throw Error("weight_row_gguf: no strip layout for type " + ggml_type_name(w.type));
  const uint8_t* strip = src + uint64_t(r / kStripRows) * w.row_bytes * kStripRows;
  const int64_t n_blocks = w.n_in / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b)
    codec->unpack(strip + uint64_t(b) * codec->block_bytes * kStripRows, int(r % kStripRows),
                  out + uint64_t(b) * codec->block_bytes);
}

}  // namespace fish
