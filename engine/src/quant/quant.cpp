// quant.h: the per-type dispatch and argument checks in front of the row
// kernels (quant_kernels.h).
#include "quant/quant.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "quant/blocks.h"
#include "quant/quant_kernels.h"

namespace fish {
namespace {

// The kernels count blocks; the public row functions count elements.
template <void (*F)(const void*, float*, int64_t), int kBlock>
void dequant_elems(const void* src, float* dst, int64_t n) {
  F(src, dst, n / kBlock);
}
template <void (*F)(const float*, void*, int64_t), int kBlock>
void quantize_elems(const float* src, void* dst, int64_t n) {
  F(src, dst, n / kBlock);
}

DequantRowFn find_dequant(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return qk::dequant_f32;
    case GgmlType::F16: return qk::dequant_f16;
    case GgmlType::BF16: return qk::dequant_bf16;
    case GgmlType::Q4_0: return dequant_elems<qk::dequant_q4_0, 32>;
    case GgmlType::Q4_1: return dequant_elems<qk::dequant_q4_1, 32>;
    case GgmlType::Q5_0: return dequant_elems<qk::dequant_q5_0, 32>;
    case GgmlType::Q5_1: return dequant_elems<qk::dequant_q5_1, 32>;
    case GgmlType::Q8_0: return dequant_elems<qk::dequant_q8_0, 32>;
    case GgmlType::Q8_1: return dequant_elems<qk::dequant_q8_1, 32>;
    case GgmlType::Q2_K: return dequant_elems<qk::dequant_q2_k, QK_K>;
    case GgmlType::Q3_K: return dequant_elems<qk::dequant_q3_k, QK_K>;
    case GgmlType::Q4_K: return dequant_elems<qk::dequant_q4_k, QK_K>;
    case GgmlType::Q5_K: return dequant_elems<qk::dequant_q5_k, QK_K>;
    case GgmlType::Q6_K: return dequant_elems<qk::dequant_q6_k, QK_K>;
    case GgmlType::Q8_K: return dequant_elems<qk::dequant_q8_k, QK_K>;
    case GgmlType::FQ3: return dequant_elems<qk::dequant_fq3, QK_K>;
    default: return nullptr;
  }
}

QuantizeRowFn find_quantize(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return qk::quantize_f32;
    case GgmlType::F16: return qk::quantize_f16;
    case GgmlType::BF16: return qk::quantize_bf16;
    case GgmlType::Q4_0: return quantize_elems<qk::quantize_q4_0, 32>;
    case GgmlType::Q8_0: return quantize_elems<qk::quantize_q8_0, 32>;
    case GgmlType::Q8_1: return quantize_elems<qk::quantize_q8_1, 32>;
    case GgmlType::Q8_K: return quantize_elems<qk::quantize_q8_k, QK_K>;
    case GgmlType::Q4_K: return quantize_elems<qk::quantize_q4_k, QK_K>;
    case GgmlType::Q5_K: return quantize_elems<qk::quantize_q5_k, QK_K>;
    case GgmlType::Q6_K: return quantize_elems<qk::quantize_q6_k, QK_K>;
    case GgmlType::FQ3: return quantize_elems<qk::quantize_fq3, QK_K>;
    default: return nullptr;
  }
}

QuantizeRowFn find_requantize(GgmlType t) {
  switch (t) {
    case GgmlType::FQ3: return quantize_elems<qk::quantize_fq3, QK_K>;
    case GgmlType::Q4_K: return quantize_elems<qk::quantize_q4_k_requant, QK_K>;
    default: return nullptr;
  }
}

// The weight formats fit scales to the data: a NaN or inf there would silently
// poison a whole block of a model file, and a magnitude whose scale overflows
// the f16 super-scale decodes to inf. Both are refused. The limit is where the
// stored f16 scale would pass 65504, with a margin: Q4_0 d = max/8; Q4_K/Q5_K
// dmin = (largest group min) / 63 and a group's min can be as large as max;
// Q6_K d <= (max / 30.8) / 128.
// The activation formats (Q8_*) are on the hot path and are left unchecked
// (no UB either way).
double weight_abs_limit(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return 0.99 * 8 * 65504.0;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::FQ3: return 0.9 * 63 * 65504.0;
    case GgmlType::Q6_K: return 0.95 * 128 * 30 * 65504.0;
    default: return 0.0;  // not a fitted weight format: no check
  }
}

void check_weights(GgmlType t, const float* src, int64_t n) {
  const double limit = weight_abs_limit(t);
  if (limit == 0.0) return;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(src[i])) {
      throw Error("quantize_row: " + ggml_type_name(t) + " input element " + std::to_string(i) +
                  " is not finite (" + std::to_string(src[i]) + ")");
    }
    if (std::fabs(src[i]) > limit) {
      throw Error("quantize_row: " + ggml_type_name(t) + " input element " + std::to_string(i) + " (" +
                  std::to_string(src[i]) + ") is beyond the format's range (|x| <= " + std::to_string(limit) + ")");
    }
  }
}

// Throws unless n >= 0 is a whole number of blocks of t.
void check_length(const char* what, GgmlType t, int64_t n) {
  const auto info = ggml_type_info(t);
  if (n < 0 || !info || n % info->block_size != 0) {
    throw Error(std::string(what) + ": a " + ggml_type_name(t) + " row of " + std::to_string(n) +
                " elements is not a whole number of " + std::to_string(info ? info->block_size : 0) +
                "-element blocks");
  }
}

}  // namespace

DequantRowFn dequant_row_fn(GgmlType t) {
  const DequantRowFn f = find_dequant(t);
  if (!f) throw Error("dequant_row: fish cannot dequantise tensor type " + ggml_type_name(t));
  return f;
}

QuantizeRowFn quantize_row_fn(GgmlType t) {
  const QuantizeRowFn f = find_quantize(t);
  if (!f) throw Error("quantize_row: fish cannot quantise to tensor type " + ggml_type_name(t));
  return f;
}

QuantizeRowFn requantize_row_fn(GgmlType t) {
  const QuantizeRowFn f = find_requantize(t);
  if (!f) throw Error("requantize_row: fish does not re-quantise to tensor type " + ggml_type_name(t));
  return f;
}

bool can_requantize_to(GgmlType t) { return find_requantize(t) != nullptr; }

bool can_dequantize(GgmlType t) { return find_dequant(t) != nullptr; }
bool can_quantize(GgmlType t) { return find_quantize(t) != nullptr; }

void dequant_row(GgmlType t, const void* src, float* dst, int64_t n) {
  const DequantRowFn f = dequant_row_fn(t);
  check_length("dequant_row", t, n);
  if (n > 0) f(src, dst, n);
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const QuantizeRowFn f = quantize_row_fn(t);
  check_length("quantize_row", t, n);
  check_weights(t, src, n);
  if (n > 0) f(src, dst, n);
}

void requantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const QuantizeRowFn f = requantize_row_fn(t);
  check_length("requantize_row", t, n);
  check_weights(t, src, n);
  if (n > 0) f(src, dst, n);
}

GgmlType vec_dot_type(GgmlType weight) {
  switch (weight) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return weight;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0: return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q8_K:
    case GgmlType::FQ3: return GgmlType::Q8_K;
    default: throw Error("vec_dot_type: fish has no dot product for weight type " + ggml_type_name(weight));
  }
}

float vec_dot_ref(GgmlType t, int64_t n, const void* w_row, const void* act_row) {
  const GgmlType at = vec_dot_type(t);  // throws for unsupported weight types
  check_length("vec_dot_ref", t, n);
  check_length("vec_dot_ref", at, n);
  if (n == 0) return 0.0f;
  return qk::vec_dot_ref_unchecked(t, n, w_row, act_row);
}

}  // namespace fish
