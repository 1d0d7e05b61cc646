// prepare_weights: the load-time repack of Q4_K / Q5_K / Q6_K / Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 matrices into 16-row
// strips (layout in cpu/matmul_strips.h) in one shared, 2 MiB-aligned
// allocation (transparent huge pages where the kernel allows), and its exact
// inverse for one row (weight_row_gguf: the scalar fallback and the f32
// reference read strips through it).
#include <sys/mman.h>

#include <cstdlib>
#include <memory>
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
using mm::Q5KStrip;
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

// ---- Q5_K ----

// Q4_K's planes from the same header and qs (BlockQ5_K has them in another
// order), then the qh planes: the 5th bit of element e is bit e / 32 of qh[e % 32],
// so plane j takes bit j of qh[4q + c] (low-nibble quads) and of qh[16 + 4q + c].
void pack_q5k(const uint8_t* const* rows, uint8_t* out) {
  const uint8_t* q4rows[kStripRows];
  BlockQ4_K q4[kStripRows];
  for (int i = 0; i < kStripRows; ++i) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(rows[i]);
    q4rows[i] = nullptr;
    if (!b) continue;
    std::memcpy(&q4[i].d, &b->d, 2);
    std::memcpy(&q4[i].dmin, &b->dmin, 2);
    std::memcpy(q4[i].scales, b->scales, sizeof b->scales);
    std::memcpy(q4[i].qs, b->qs, sizeof b->qs);
    q4rows[i] = reinterpret_cast<const uint8_t*>(&q4[i]);
  }
  pack_q4k(q4rows, out);
  for (int i = 0; i < kStripRows; ++i) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(rows[i]);
    for (int j = 0; j < 8; ++j) {
      uint32_t v = 0;
      for (int q = 0; b && q < 4; ++q) {
        v |= (load32(b->qh + 4 * q) >> j & 0x01010101u) << (2 * q);
        v |= (load32(b->qh + 16 + 4 * q) >> j & 0x01010101u) << (2 * q + 1);
      }
      store32(out + Q5KStrip::kQh + 64 * j + 4 * i, v);
    }
  }
}

void unpack_q5k(const uint8_t* in, int i, uint8_t* block) {
  BlockQ4_K q4;
  unpack_q4k(in, i, reinterpret_cast<uint8_t*>(&q4));
  BlockQ5_K b{};
  std::memcpy(&b.d, &q4.d, 2);
  std::memcpy(&b.dmin, &q4.dmin, 2);
  std::memcpy(b.scales, q4.scales, sizeof b.scales);
  std::memcpy(b.qs, q4.qs, sizeof b.qs);
  for (int j = 0; j < 8; ++j)
    for (int q = 0; q < 4; ++q)
      for (int c = 0; c < 4; ++c) {
        const uint8_t v = in[Q5KStrip::kQh + 64 * j + 4 * i + c];
        b.qh[4 * q + c] |= uint8_t(((v >> (2 * q)) & 1) << j);
        b.qh[16 + 4 * q + c] |= uint8_t(((v >> (2 * q + 1)) & 1) << j);
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

// ---- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (8 GGUF blocks per strip-block) ----

// The 5th bits of a Q5_0 / Q5_1 block: bit e of the GGUF qh word (element e)
// goes to bit 2q of byte c for e = 4q + c and to bit 2q + 1 for e = 16 + 4q + c.
uint32_t qh_plane_word(uint32_t qh) {
  uint32_t v = 0;
  for (int q = 0; q < 4; ++q)
    for (int c = 0; c < 4; ++c)
      v |= (qh >> (4 * q + c) & 1u) << (8 * c + 2 * q) | (qh >> (16 + 4 * q + c) & 1u) << (8 * c + 2 * q + 1);
  return v;
}
uint32_t qh_gguf_word(uint32_t v) {
  uint32_t qh = 0;
  for (int q = 0; q < 4; ++q)
    for (int c = 0; c < 4; ++c)
      qh |= (v >> (8 * c + 2 * q) & 1u) << (4 * q + c) | (v >> (8 * c + 2 * q + 1) & 1u) << (16 + 4 * q + c);
  return qh;
}

// Strip-block of nj blocks of kT (Block: its GGUF block) from rows[i] (null:
// a padding row, all zero bytes: d = 0). The nibble planes are the GGUF qs
// bytes as they are (qs[4q + c]: element 4q + c low, 16 + 4q + c high);
// Q8_0's bytes are flipped to q + 128.
template <mm::Strip32 kT, class Block>
void pack_l32(const uint8_t* const* rows, uint8_t* out, int nj) {
  using L = mm::Strip32Layout<kT>;
  for (int i = 0; i < kStripRows; ++i)
    for (int j = 0; j < nj; ++j) {
      Block b{};
      if (rows[i]) std::memcpy(&b, rows[i] + uint64_t(j) * sizeof b, sizeof b);
      std::memcpy(out + L::kD + 32 * j + 2 * i, &b.d, 2);
      const auto* qs = reinterpret_cast<const uint8_t*>(b.qs);
      if constexpr (L::kQ8) {
        for (int u = 0; u < 8; ++u)
          store32(out + L::qs(nj) + 64 * (8 * j + u) + 4 * i, load32(qs + 4 * u) ^ 0x80808080u);
      } else {
        for (int q = 0; q < 4; ++q) store32(out + L::qs(nj) + 64 * (4 * j + q) + 4 * i, load32(qs + 4 * q));
      }
      if constexpr (L::kMin) std::memcpy(out + L::m(nj) + 32 * j + 2 * i, &b.m, 2);
      if constexpr (L::kQh) store32(out + L::qh(nj) + 64 * j + 4 * i, qh_plane_word(load32(b.qh)));
    }
}

template <mm::Strip32 kT, class Block>
void unpack_l32(const uint8_t* in, int i, uint8_t* blocks, int nj) {
  using L = mm::Strip32Layout<kT>;
  for (int j = 0; j < nj; ++j) {
    Block b{};
    std::memcpy(&b.d, in + L::kD + 32 * j + 2 * i, 2);
    auto* qs = reinterpret_cast<uint8_t*>(b.qs);
    if constexpr (L::kQ8) {
      for (int u = 0; u < 8; ++u) store32(qs + 4 * u, load32(in + L::qs(nj) + 64 * (8 * j + u) + 4 * i) ^ 0x80808080u);
    } else {
      for (int q = 0; q < 4; ++q) store32(qs + 4 * q, load32(in + L::qs(nj) + 64 * (4 * j + q) + 4 * i));
    }
    if constexpr (L::kMin) std::memcpy(&b.m, in + L::m(nj) + 32 * j + 2 * i, 2);
    if constexpr (L::kQh) store32(b.qh, qh_gguf_word(load32(in + L::qh(nj) + 64 * j + 4 * i)));
    std::memcpy(blocks + j * sizeof b, &b, sizeof b);
  }
}

// A strip-block is 256 elements of 16 rows: one GGUF block of the K-quants,
// 8 of the 32-element types (the last of a row possibly fewer: nj blocks). pack /
// unpack take the strip-block's GGUF blocks of each row (nj of them).
struct StripCodec {
  uint64_t gguf_block;  // bytes of one GGUF block
  int sub;              // GGUF blocks per full strip-block
  void (*pack)(const uint8_t* const* rows, uint8_t* out, int nj);
  void (*unpack)(const uint8_t* in, int i, uint8_t* blocks, int nj);
};

const StripCodec* codec_of(GgmlType t) {
  static const StripCodec q4{sizeof(BlockQ4_K), 1, [](const uint8_t* const* r, uint8_t* o, int) { pack_q4k(r, o); },
                             [](const uint8_t* in, int i, uint8_t* b, int) { unpack_q4k(in, i, b); }};
  static const StripCodec q5{sizeof(BlockQ5_K), 1, [](const uint8_t* const* r, uint8_t* o, int) { pack_q5k(r, o); },
                             [](const uint8_t* in, int i, uint8_t* b, int) { unpack_q5k(in, i, b); }};
  static const StripCodec q6{sizeof(BlockQ6_K), 1, [](const uint8_t* const* r, uint8_t* o, int) { pack_q6k(r, o); },
                             [](const uint8_t* in, int i, uint8_t* b, int) { unpack_q6k(in, i, b); }};
  using mm::Strip32;
  static const StripCodec q40{sizeof(BlockQ4_0), 8, pack_l32<Strip32::Q4_0, BlockQ4_0>, unpack_l32<Strip32::Q4_0, BlockQ4_0>};
  static const StripCodec q41{sizeof(BlockQ4_1), 8, pack_l32<Strip32::Q4_1, BlockQ4_1>, unpack_l32<Strip32::Q4_1, BlockQ4_1>};
  static const StripCodec q50{sizeof(BlockQ5_0), 8, pack_l32<Strip32::Q5_0, BlockQ5_0>, unpack_l32<Strip32::Q5_0, BlockQ5_0>};
  static const StripCodec q51{sizeof(BlockQ5_1), 8, pack_l32<Strip32::Q5_1, BlockQ5_1>, unpack_l32<Strip32::Q5_1, BlockQ5_1>};
  static const StripCodec q80{sizeof(BlockQ8_0), 8, pack_l32<Strip32::Q8_0, BlockQ8_0>, unpack_l32<Strip32::Q8_0, BlockQ8_0>};
  switch (t) {
    case GgmlType::Q4_K: return &q4;
    case GgmlType::Q5_K: return &q5;
    case GgmlType::Q6_K: return &q6;
    case GgmlType::Q4_0: return &q40;
    case GgmlType::Q4_1: return &q41;
    case GgmlType::Q5_0: return &q50;
    case GgmlType::Q5_1: return &q51;
    case GgmlType::Q8_0: return &q80;
    default: return nullptr;
  }
}

uint64_t gguf_row_bytes(const WeightView& w) {
  const auto info = ggml_type_info(w.type);
  return uint64_t(w.n_in / info->block_size) * uint64_t(info->type_size);
}

// The checks of one weight to repack; its strip bytes.
uint64_t strip_bytes_of(const WeightView& w, int i) {
  const std::string what = "prepare_weights: weight " + std::to_string(i) + ": ";
  if (w.layout != WeightLayout::Gguf)
    throw Error(what + "already prepared (layout " + std::to_string(int(w.layout)) + ")");
  const int64_t bs = ggml_type_info(w.type)->block_size;
  if (w.n_in <= 0 || w.n_in % bs != 0)
    throw Error(what + "n_in " + std::to_string(w.n_in) + " is not a positive multiple of " + std::to_string(bs));
  const uint64_t rb = gguf_row_bytes(w);
  if (w.row_bytes < rb)
    throw Error(what + "row_bytes " + std::to_string(w.row_bytes) + " is less than the " + std::to_string(rb) +
                " bytes of a " + ggml_type_name(w.type) + " row of " + std::to_string(w.n_in));
  if (!w.data) throw Error(what + "data is null");
  return rb * kStripRows * uint64_t((w.n_out + kStripRows - 1) / kStripRows);
}

// Strip-block b of a row of n_gguf GGUF blocks: its first GGUF block and how many it holds.
struct StripBlock {
  int64_t first;
  int nj;
};
StripBlock strip_block(const StripCodec& c, int64_t n_gguf, int64_t b) {
  const int64_t first = b * c.sub;
  return {first, int(n_gguf - first < c.sub ? n_gguf - first : c.sub)};
}

// Writes the strips of w (GGUF rows) at dst.
void pack_weight(const WeightView& w, uint8_t* dst, ThreadPool* pool) {
  const StripCodec* codec = codec_of(w.type);
  const uint64_t strip_bytes = gguf_row_bytes(w) * kStripRows;
  const int64_t n_gguf = w.n_in / ggml_type_info(w.type)->block_size;
  const int64_t n_strips = (w.n_out + kStripRows - 1) / kStripRows, n_blocks = (n_gguf + codec->sub - 1) / codec->sub;
  const auto* src = static_cast<const uint8_t*>(w.data);
  auto pack_strips = [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t b = 0; b < n_blocks; ++b) {
        const StripBlock sb = strip_block(*codec, n_gguf, b);
        const uint8_t* rows[kStripRows];
        for (int i = 0; i < kStripRows; ++i) {
          const int64_t r = s * kStripRows + i;
          rows[i] = r < w.n_out ? src + uint64_t(r) * w.row_bytes + uint64_t(sb.first) * codec->gguf_block : nullptr;
        }
        codec->pack(rows, dst + uint64_t(s) * strip_bytes + uint64_t(sb.first) * codec->gguf_block * kStripRows, sb.nj);
      }
  };
  if (pool) pool->parallel_for(n_strips, 8, [&](int64_t s0, int64_t s1, int) { pack_strips(s0, s1); });
  else pack_strips(0, n_strips);
}

}  // namespace

std::vector<PreparedWeight> prepare_weights(const WeightView* ws, int n, ThreadPool* pool) {
  std::vector<PreparedWeight> out(size_t(n > 0 ? n : 0));
  const bool strips = mm::active_family_has_strips();
  // Which weights get strips, and their offsets in the shared allocation
  // (each 64-byte aligned: the kernels' loads stay within cache lines).
  std::vector<uint64_t> offset(out.size(), ~uint64_t(0));
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) {
    out[size_t(i)].view_ = ws[i];
    if (ws[i].layout != WeightLayout::Gguf)
      throw Error("prepare_weights: weight " + std::to_string(i) + ": already prepared (layout " +
                  std::to_string(int(ws[i].layout)) + ")");
    if (!strips || !codec_of(ws[i].type) || ws[i].n_out <= 0) continue;
    offset[size_t(i)] = total;
    total += (strip_bytes_of(ws[i], i) + 63) / 64 * 64;
  }
  if (total == 0) return out;
  constexpr uint64_t kHuge = 2u << 20;
  const uint64_t alloc = (total + kHuge - 1) / kHuge * kHuge;
  auto* mem = static_cast<uint8_t*>(std::aligned_alloc(kHuge, alloc));
  if (!mem) throw Error("prepare_weights: cannot allocate " + std::to_string(alloc) + " bytes");
  std::shared_ptr<const void> storage(mem, [](const void* p) { std::free(const_cast<void*>(p)); });
  madvise(mem, alloc, MADV_HUGEPAGE);  // advice only: without it the pages are 4 KiB
  for (int i = 0; i < n; ++i) {
    if (offset[size_t(i)] == ~uint64_t(0)) continue;
    PreparedWeight& p = out[size_t(i)];
    pack_weight(ws[i], mem + offset[size_t(i)], pool);
    p.view_.data = mem + offset[size_t(i)];
    p.view_.row_bytes = gguf_row_bytes(ws[i]);
    p.view_.layout = WeightLayout::Strips16;
    p.storage_ = storage;
    p.owned_bytes_ = strip_bytes_of(ws[i], i);
  }
  return out;
}

PreparedWeight prepare_weight(const WeightView& w, ThreadPool* pool) {
  return std::move(prepare_weights(&w, 1, pool)[0]);
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
  const int64_t n_gguf = w.n_in / ggml_type_info(w.type)->block_size, n_blocks = (n_gguf + codec->sub - 1) / codec->sub;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const StripBlock sb = strip_block(*codec, n_gguf, b);
    codec->unpack(strip + uint64_t(sb.first) * codec->gguf_block * kStripRows, int(r % kStripRows),
                  out + uint64_t(sb.first) * codec->gguf_block, sb.nj);
  }
}

}  // namespace fish
