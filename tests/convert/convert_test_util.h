// Helpers shared by the convert tests: the scratch folder, and the f32 values of
// a tensor.
#pragma once
#include <vector>

#include "gguf/gguf_file.h"
#include "quant/quant.h"
#include "scratch_dir.h"

namespace fish::test {

// All elements of a tensor as f32 (rows dequantised one by one).
inline std::vector<float> tensor_f32(const gguf::TensorInfo& t) {
  std::vector<float> v(size_t(t.n_elements()));
  for (int64_t r = 0; r < t.n_rows(); ++r)
    dequant_row(t.type, t.data + uint64_t(r) * t.row_bytes(), v.data() + r * t.ne[0], t.ne[0]);
  return v;
}

}  // namespace fish::test
