// What the CPU (and the OS, for the register state) supports, read once with
// CPUID and XGETBV: the instruction sets the *_avx2 / *_avx512 kernel files are
// compiled for (FishSimd.cmake). Used instead of __builtin_cpu_supports, whose
// feature names differ between compilers (clang 14 knows no "f16c").
#pragma once

namespace fish {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
  bool avxvnni = false;  // VEX-encoded vpdpbusd on 128/256 bits (AVX-VNNI)
  // The kernel families: AVX2 + FMA + F16C + BMI2 (x86-64-v3), that plus
  // AVX-VNNI, and that plus AVX-512 F/BW/VL/DQ + VNNI.
  bool x86_64_v3() const { return avx2 && fma && f16c && bmi2; }
  bool avx2_vnni() const { return x86_64_v3() && avxvnni; }
  bool avx512_vnni() const { return x86_64_v3() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni; }
};

// All false on a CPU other than x86-64, or when the OS does not save the
// YMM (AVX) / ZMM (AVX-512) registers.
const CpuFeatures& cpu_features();

}  // namespace fish
