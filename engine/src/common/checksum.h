// A fast 64-bit checksum of a byte range, for data fish writes and reads back
// itself (the re-quantisation cache): it must catch a flipped byte, a torn or
// truncated write and a stale file, at memory speed (GBs are read at load).
// Not cryptographic: nothing here defends against a crafted file, only
// against accidents (the cache lives in the user's own folder).
//
// Four independent lanes take one 8-byte word each per 32-byte stripe (so the
// multiplies pipeline); a lane step h' = rotl(h ^ w·K1, 29)·K2 is a bijection
// of h for a fixed word and of the word for a fixed h, so any single changed
// word changes its lane's final state. The tail, the length and the four lanes
// are then folded and mixed (xor-shift-multiply) into one value.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fish {

class Checksum64 {
 public:
  explicit Checksum64(uint64_t seed = 0) {
    for (int i = 0; i < 4; ++i) lane_[i] = seed + kInit[i];
  }

  void update(const void* data, size_t n) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    total_ += n;
    if (fill_) {  // complete a stripe started by an earlier call
      const size_t take = n < 32 - fill_ ? n : 32 - fill_;
      std::memcpy(buf_ + fill_, p, take);
      fill_ += take;
      p += take;
      n -= take;
      if (fill_ < 32) return;
      stripe(buf_);
      fill_ = 0;
    }
    for (; n >= 32; n -= 32, p += 32) stripe(p);
    std::memcpy(buf_, p, n);
    fill_ = n;
  }

  uint64_t digest() const {
    uint64_t h = total_ * kK2;
    for (int i = 0; i < 4; ++i) h = mix(h ^ mix(lane_[i] + uint64_t(i)));
    for (size_t i = 0; i < fill_; ++i) h = mix(h ^ (uint64_t(buf_[i]) << (8 * (i & 7))) ^ uint64_t(i));
    return mix(h ^ fill_);
  }

  static uint64_t of(const void* data, size_t n, uint64_t seed = 0) {
    Checksum64 c(seed);
    c.update(data, n);
    return c.digest();
  }

 private:
  static constexpr uint64_t kK1 = 0x9e3779b97f4a7c15ull;  // odd: multiplying by it is a bijection
  static constexpr uint64_t kK2 = 0xc2b2ae3d27d4eb4full;
  static constexpr uint64_t kInit[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                                        0x082efa98ec4e6c89ull};

  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t mix(uint64_t x) {
    x ^= x >> 31;
    x *= kK1;
    x ^= x >> 29;
    x *= kK2;
    return x ^ (x >> 32);
  }
  void stripe(const uint8_t* p) {
    for (int i = 0; i < 4; ++i) {
      uint64_t w;
      std::memcpy(&w, p + 8 * i, 8);
      lane_[i] = rotl(lane_[i] ^ (w * kK1), 29) * kK2;
    }
  }

  uint64_t lane_[4];
  uint8_t buf_[32] = {};
  size_t fill_ = 0;
  uint64_t total_ = 0;
};

}  // namespace fish
