// The portable kernel family: one dot product per (row, token), with ggml's
// arithmetic (integer sums of weight blocks · int8 activation blocks, scaled in
// f32 per block), so it reproduces llama.cpp's CPU results and is the yardstick
// the SIMD families are tested against. Activations are in ggml's own layouts
// (Q8_0, Q8_1, Q8_K; f32 for float weights).
#include <cstring>

#include "common/fp16.h"
#include "cpu/matmul_kernels.h"
#include "quant/blocks.h"

namespace fish::mm {

namespace {

float f16(uint16_t h) { return fp16_to_fp32(h); }

// ---- float weights · f32 activations (8 partial sums, like a SIMD lane set) ----

template <class Load>
float dot_float(const void* w, const float* x, int64_t n, Load load) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += load(w, i + l) * x[i + l];
  for (; i < n; ++i) acc[0] += load(w, i) * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

float dot_f32(const uint8_t* w, const uint8_t* a, int64_t n) {
  return dot_float(w, reinterpret_cast<const float*>(a), n, [](const void* p, int64_t i) {
    float v;
    std::memcpy(&v, static_cast<const uint8_t*>(p) + 4 * i, 4);
    return v;
  });
}
float dot_f16(const uint8_t* w, const uint8_t* a, int64_t n) {
  return dot_float(w, reinterpret_cast<const float*>(a), n, [](const void* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, static_cast<const uint8_t*>(p) + 2 * i, 2);
    return fp16_to_fp32(h);
  });
}
float dot_bf16(const uint8_t* w, const uint8_t* a, int64_t n) {
  return dot_float(w, reinterpret_cast<const float*>(a), n, [](const void* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, static_cast<const uint8_t*>(p) + 2 * i, 2);
    return bf16_to_fp32(h);
  });
}

// ---- 32-element blocks · Q8_0 / Q8_1 ----

// Q4_0: element j = (qs[j] & 15) - 8, element j + 16 = (qs[j] >> 4) - 8.
float dot_q4_0(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* x = reinterpret_cast<const BlockQ4_0*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK4_0; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += ((x[b].qs[j] & 15) - 8) * y[b].qs[j] + ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
    sum += float(isum) * (f16(x[b].d) * f16(y[b].d));
  }
  return sum;
}

// Q4_1: x = q * d + m, so x · y = d dy Σ q qy + m s (s = dy Σ qy of Q8_1).
float dot_q4_1(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* x = reinterpret_cast<const BlockQ4_1*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_1*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK4_1; ++b) {
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += (x[b].qs[j] & 15) * y[b].qs[j] + (x[b].qs[j] >> 4) * y[b].qs[j + 16];
    sum += float(isum) * (f16(x[b].d) * f16(y[b].d)) + f16(x[b].m) * f16(y[b].s);
  }
  return sum;
}

// Bit 4 of the 5-bit values of a Q5 block: element j takes bit j of qh.
inline uint32_t q5_high(const uint8_t* qh) {
  return uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
}

float dot_q5_0(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* x = reinterpret_cast<const BlockQ5_0*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK5_0; ++b) {
    const uint32_t qh = q5_high(x[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int v0 = int((x[b].qs[j] & 15) | (((qh >> j) & 1) << 4)) - 16;
      const int v1 = int((x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      isum += v0 * y[b].qs[j] + v1 * y[b].qs[j + 16];
    }
    sum += float(isum) * (f16(x[b].d) * f16(y[b].d));
  }
  return sum;
}

float dot_q5_1(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* x = reinterpret_cast<const BlockQ5_1*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_1*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK5_1; ++b) {
    const uint32_t qh = q5_high(x[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int v0 = int((x[b].qs[j] & 15) | (((qh >> j) & 1) << 4));
      const int v1 = int((x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      isum += v0 * y[b].qs[j] + v1 * y[b].qs[j + 16];
    }
    sum += float(isum) * (f16(x[b].d) * f16(y[b].d)) + f16(x[b].m) * f16(y[b].s);
  }
  return sum;
}

float dot_q8_0(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* x = reinterpret_cast<const BlockQ8_0*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    int isum = 0;
    for (int j = 0; j < QK8_0; ++j) isum += x[b].qs[j] * y[b].qs[j];
    sum += float(isum) * (f16(x[b].d) * f16(y[b].d));
  }
  return sum;
}

// ---- K-quants · Q8_K (256-element super-blocks) ----

// Q2_K: element 128h + 32j + l = (qs[32h + l] >> 2j) & 3, group (16) scale
// scales[g] & 15 and min scales[g] >> 4: x = d sc q - dmin m.
float dot_q2_k(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* x = reinterpret_cast<const BlockQ2_K*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int mins = 0;
    for (int g = 0; g < 16; ++g) mins += (x[b].scales[g] >> 4) * y[b].bsums[g];
    int isum = 0;
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int half = 0; half < 2; ++half) {
          const int g = 8 * h + 2 * j + half;
          const int8_t* q8 = y[b].qs + 128 * h + 32 * j + 16 * half;
          const uint8_t* q2 = x[b].qs + 32 * h + 16 * half;
          int s = 0;
          for (int l = 0; l < 16; ++l) s += q8[l] * ((q2[l] >> (2 * j)) & 3);
          isum += (x[b].scales[g] & 15) * s;
        }
    sum += y[b].d * f16(x[b].d) * float(isum) - y[b].d * f16(x[b].dmin) * float(mins);
  }
  return sum;
}

// The 16 signed 6-bit scales of a Q3_K block: low 4 bits from bytes 0..7
// (nibble j / 8), high 2 bits from bytes 8..11 (2-bit field j / 4 of byte 8 + j % 4).
void q3_k_scales(const uint8_t* s, int* out) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = (lo | hi << 4) - 32;
  }
}

// Q3_K: element 128h + 32j + l = ((qs[32h + l] >> 2j) & 3) - 4 unless bit
// (4h + j) of hmask[l] is set; x = d scale[g] q.
float dot_q3_k(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* x = reinterpret_cast<const BlockQ3_K*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int sc[16];
    q3_k_scales(x[b].scales, sc);
    int isum = 0;
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int half = 0; half < 2; ++half) {
          const int g = 8 * h + 2 * j + half;
          const int8_t* q8 = y[b].qs + 128 * h + 32 * j + 16 * half;
          int s = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int q = (x[b].qs[32 * h + l] >> (2 * j)) & 3;
            const int m = (x[b].hmask[l] >> (4 * h + j)) & 1 ? 0 : 4;
            s += q8[l - 16 * half] * (q - m);
          }
          isum += sc[g] * s;
        }
    sum += f16(x[b].d) * y[b].d * float(isum);
  }
  return sum;
}

// Q4_K / Q5_K: element 64j + l = qs[32j + l] & 15, 64j + 32 + l = qs[32j + l] >> 4
// (+16 from qh[l] bit 2j / 2j + 1 for Q5_K); 32-element sub-block s has 6-bit
// scale sc[s] and min m[s]: x = d sc q - dmin m.
template <bool kQ5>
float dot_q45_k(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* y = reinterpret_cast<const BlockQ8_K*>(a);
  const size_t bsize = kQ5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const uint8_t* blk = w + size_t(b) * bsize;
    // Q4_K and Q5_K share the head (d, dmin, scales); Q5_K puts qh before qs.
    const auto* head = reinterpret_cast<const BlockQ4_K*>(blk);
    const uint8_t* qh = kQ5 ? reinterpret_cast<const BlockQ5_K*>(blk)->qh : nullptr;
    const uint8_t* qs = kQ5 ? reinterpret_cast<const BlockQ5_K*>(blk)->qs : head->qs;
    int isum = 0, mins = 0;
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      get_scale_min_k4(s, head->scales, &sc, &m);
      mins += m * (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]);
      const int j = s / 2, shift = 4 * (s % 2);
      const int8_t* q8 = y[b].qs + 32 * s;
      int t = 0;
      for (int l = 0; l < 32; ++l) {
        int q = (qs[32 * j + l] >> shift) & 15;
        if (kQ5) q += ((qh[l] >> s) & 1) << 4;
        t += q * q8[l];
      }
      isum += sc * t;
    }
    sum += y[b].d * f16(head->d) * float(isum) - y[b].d * f16(head->dmin) * float(mins);
  }
  return sum;
}

// Q6_K: element 128h + 32k + l (k = 0..3) takes 4 bits from ql[64h + l + 32(k & 1)]
// (low nibble for k < 2, high for k >= 2) and 2 bits from qh[32h + l] at bit 2k;
// x = d scales[e / 16] (q - 32).
float dot_q6_k(const uint8_t* w, const uint8_t* a, int64_t n) {
  const auto* x = reinterpret_cast<const BlockQ6_K*>(w);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int isum = 0;
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        for (int half = 0; half < 2; ++half) {
          const int e0 = 128 * h + 32 * k + 16 * half;
          int s = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const uint8_t lo = x[b].ql[64 * h + l + 32 * (k & 1)];
            const int q = ((k < 2 ? lo & 15 : lo >> 4) | (((x[b].qh[32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
            s += q * y[b].qs[128 * h + 32 * k + l];
          }
          isum += x[b].scales[e0 / 16] * s;
        }
    sum += f16(x[b].d) * y[b].d * float(isum);
  }
  return sum;
}

// ---- the kernel wrapper: one dot per (row, token) ----

using DotFn = float (*)(const uint8_t*, const uint8_t*, int64_t);

template <DotFn kDot>
void kernel(const KernelArgs& k) {
  for (int64_t r = k.r0; r < k.r1; ++r) {
    const uint8_t* w = k.w + uint64_t(r) * k.w_stride;
    for (int t = 0; t < k.n_tok; ++t) k.y[t * k.ldy + r] = kDot(w, k.act + uint64_t(t) * k.act_stride, k.n_in);
  }
}

KernelFamily make_family() {
  KernelFamily f{};
  f.name = "scalar";
  auto set = [&](WType t, KernelFn fn, ActLayout l) { f.entry[int(t)] = {fn, l}; };
  set(WType::F32, kernel<dot_f32>, ActLayout::F32);
  set(WType::F16, kernel<dot_f16>, ActLayout::F32);
  set(WType::BF16, kernel<dot_bf16>, ActLayout::F32);
  set(WType::Q4_0, kernel<dot_q4_0>, ActLayout::Q8_0);
  set(WType::Q4_1, kernel<dot_q4_1>, ActLayout::Q8_1);
  set(WType::Q5_0, kernel<dot_q5_0>, ActLayout::Q8_0);
  set(WType::Q5_1, kernel<dot_q5_1>, ActLayout::Q8_1);
  set(WType::Q8_0, kernel<dot_q8_0>, ActLayout::Q8_0);
  set(WType::Q2_K, kernel<dot_q2_k>, ActLayout::Q8_K);
  set(WType::Q3_K, kernel<dot_q3_k>, ActLayout::Q8_K);
  set(WType::Q4_K, kernel<dot_q45_k<false>>, ActLayout::Q8_K);
  set(WType::Q5_K, kernel<dot_q45_k<true>>, ActLayout::Q8_K);
  set(WType::Q6_K, kernel<dot_q6_k>, ActLayout::Q8_K);
  f.quantize = nullptr;  // uses only ggml's layouts
  return f;
}

}  // namespace

const KernelFamily* family_scalar() {
  static const KernelFamily f = make_family();
  return &f;
}

}  // namespace fish::mm
