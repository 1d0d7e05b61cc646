// Activation layouts of the matmul kernels: their sizes, and the quantisers of
// ggml's own activation formats (Q8_0, Q8_1, Q8_K), which are quant's
// quantize_row (ggml's arithmetic, so the scalar kernels reproduce llama.cpp).
#include <cstring>
#include <string>

#include "common/error.h"
#include "cpu/matmul_kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace fish::mm {

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
    case ActLayout::X8_KS: return x8_ks_planes(n_in).total;
    case ActLayout::Count: break;
  }
  throw Error("matmul: unknown activation layout " + std::to_string(int(l)));
}

void quantize_act_scalar(ActLayout l, const float* x, int64_t n_in, uint8_t* dst) {
  switch (l) {
    case ActLayout::F32: std::memcpy(dst, x, size_t(n_in) * 4); return;
    case ActLayout::Q8_0: {
      static const QuantizeRowFn q = quantize_act_row_fn(GgmlType::Q8_0);
      q(x, dst, n_in);
      return;
    }
    case ActLayout::Q8_1: {
      static const QuantizeRowFn q = quantize_act_row_fn(GgmlType::Q8_1);
      q(x, dst, n_in);
      return;
    }
    case ActLayout::Q8_K: {
      static const QuantizeRowFn q = quantize_row_fn(GgmlType::Q8_K);
      q(x, dst, n_in);
      return;
    }
    default: break;
  }
  throw Error("matmul: the scalar quantiser has no activation layout " + std::to_string(int(l)));
}

}  // namespace fish::mm
