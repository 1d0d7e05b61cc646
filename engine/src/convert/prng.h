// Counter-based random numbers for synthetic weights: element i of a tensor is a
// pure function of (seed, tensor name, i), so any thread can fill any range of any
// tensor and the file comes out the same for every thread count and chunking.
#pragma once
#include <cstdint>
#include <string_view>

namespace fish::convert {

// splitmix64's finaliser: a bijective 64-bit mix with full avalanche.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// The stream key of one tensor: FNV-1a of its name, mixed with the seed.
inline uint64_t stream_key(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return mix64(mix64(seed) ^ h);
}

// An approximately standard normal value for counter i of a stream: the sum of
// four independent 16-bit uniforms from one 64-bit hash, centred and scaled to
// unit variance (Irwin-Hall, n = 4: within 0.01 of the normal CDF everywhere,
// tails cut at ±3.46σ). Cheap and branch-free, so whole rows vectorise.
inline float unit_normal(uint64_t key, uint64_t i) {
  const uint64_t h = mix64(key + i * 0x9e3779b97f4a7c15ull);
  const float s = float(h & 0xffff) + float((h >> 16) & 0xffff) + float((h >> 32) & 0xffff) + float(h >> 48);
  // mean 4 * 65535/2, variance 4 * (65536^2 - 1) / 12
  constexpr float kMean = 131070.0f;
  constexpr float kInvStd = 1.0f / 37837.2272f;
  return (s - kMean) * kInvStd;
}

}  // namespace fish::convert
