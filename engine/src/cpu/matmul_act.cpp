// Activation layouts of the matmul kernels: their sizes, and the scalar
// quantisers of ggml's activation formats (Q8_0, Q8_1, Q8_K), with ggml's
// arithmetic so the scalar kernels reproduce llama.cpp's CPU results.
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/fp16.h"
#include "cpu/matmul_kernels.h"
#include "quant/blocks.h"

namespace fish::mm {

namespace {

// Round half to even, as ggml's nearest_int (valid for |v| < 2^22).
int nearest_int(float v) { return int(std::lrintf(v)); }

// Q8_0: per 32-block d = amax / 127 (stored as f16), q = roundf(x / d).
void quantize_q8_0(const float* x, int64_t n, BlockQ8_0* y) {
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) y[b].qs[j] = int8_t(std::roundf(x[j] * id));
  }
}

// Q8_1: the values of Q8_0 plus s = f16(d * Σ q) with the unrounded d.
void quantize_q8_1(const float* x, int64_t n, BlockQ8_1* y) {
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      y[b].qs[j] = int8_t(std::roundf(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].d = fp32_to_fp16(d);
    y[b].s = fp32_to_fp16(float(sum) * d);
  }
}

// Q8_K: per 256-block the signed value of largest magnitude maps to -127
// (d = -max / 127, f32), q = nearest_int(x / d), bsums per 16.
void quantize_q8_k(const float* x, int64_t n, BlockQ8_K* y) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof y[b]);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[b].qs[j] = int8_t(v < 127 ? v : 127);
    }
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[b].qs[16 * g + l];
      y[b].bsums[g] = int16_t(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace

uint64_t act_row_bytes(ActLayout l, int64_t n_in) {
  const uint64_t n = uint64_t(n_in);
  switch (l) {
    case ActLayout::F32: return n * 4;
    case ActLayout::Q8_0: return pad64(n / QK8_0 * sizeof(BlockQ8_0));
    case ActLayout::Q8_1: return pad64(n / QK8_1 * sizeof(BlockQ8_1));
    case ActLayout::Q8_K: return pad64(n / QK_K * sizeof(BlockQ8_K));
    case ActLayout::X8_32:
    case ActLayout::X8_32S: return x8_32_planes(n_in).total;
    case ActLayout::X8_K: return x8_k_planes(n_in).total;
    case ActLayout::Count: break;
  }
  throw Error("matmul: unknown activation layout " + std::to_string(int(l)));
}

void quantize_act_scalar(ActLayout l, const float* x, int64_t n_in, uint8_t* dst) {
  switch (l) {
    case ActLayout::F32: std::memcpy(dst, x, size_t(n_in) * 4); return;
    case ActLayout::Q8_0: quantize_q8_0(x, n_in, reinterpret_cast<BlockQ8_0*>(dst)); return;
    case ActLayout::Q8_1: quantize_q8_1(x, n_in, reinterpret_cast<BlockQ8_1*>(dst)); return;
    case ActLayout::Q8_K: quantize_q8_k(x, n_in, reinterpret_cast<BlockQ8_K*>(dst)); return;
    default: break;
  }
  throw Error("matmul: the scalar quantiser has no activation layout " + std::to_string(int(l)));
}

}  // namespace fish::mm
