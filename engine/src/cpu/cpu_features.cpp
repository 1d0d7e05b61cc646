#include "cpu/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace fish {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// XCR0 (the register state the OS saves on a context switch). xgetbv is only
// valid when CPUID says OSXSAVE; inline asm needs no -mxsave.
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  const uint64_t x = xcr0();
  const bool ymm = (x & 0x6) == 0x6;     // SSE + AVX state
  const bool zmm = (x & 0xe6) == 0xe6;   // + opmask, ZMM0-15 upper halves, ZMM16-31
  if (!ymm) return f;
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  f.bmi2 = b & (1u << 8);
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __cpuid_count(7, 1, a1, b1, c1, d1);  // sub-leaf 1 (zeros where the CPU has none)
  f.avxvnni = a1 & (1u << 4);
  if (zmm) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
  }
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace fish
