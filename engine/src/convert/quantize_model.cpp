#include "convert/quantize_model.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "convert/row_fill.h"
#include "convert/type_mix.h"
#include "cpu/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"

namespace fish::convert {

namespace {

// The block count: {arch}.block_count, else one more than the highest blk.N.
int block_count(const gguf::File& f) {
  if (auto arch = f.get_str("general.architecture"))
    if (auto n = f.get_u32(std::string(*arch) + ".block_count")) return int(*n);
  int n = 0;
  for (auto& t : f.tensors()) n = std::max(n, layer_of(t.name) + 1);
  return n;
}

}  // namespace

QuantizeSummary quantize_model(const std::string& in, const std::string& out, const std::string& type,
                               int n_threads, const std::function<void(const std::string&)>& note) {
  const auto fmt = parse_format(type);
  if (!fmt || *fmt == Format::F32 || *fmt == Format::F16)
    throw Error("quantize: unknown type '" + type + "' (one of: Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K)");
  auto src = gguf::File::open(in);
  // A model no loader accepts is not worth a copy in another type.
  if (const gguf::TensorInfo* te = src->tensor("token_embd.weight"); te && te->n_dims >= 2 && te->ne[1] == 0)
    throw Error(in + ": tensor 'token_embd.weight' has shape " + te->shape_str() + ": the vocabulary is empty");
  const int n_layer = block_count(*src);
  const bool tied = src->tensor("output.weight") == nullptr;
  int n_expert = 0;  // the K-quant mixes differ for 8 experts (type_mix.h)
  if (auto a = src->get_str("general.architecture"))
    if (auto e = src->get_u32(std::string(*a) + ".expert_count")) n_expert = int(*e);

  gguf::Writer w;
  w.set_version(3);
  for (auto& kv : src->kvs()) w.set_value(kv.key, kv.value);
  w.set_u32("general.file_type", file_type(*fmt));
  if (!w.has("general.quantization_version")) w.set_u32("general.quantization_version", 2);

  ThreadPool pool(n_threads);
  QuantizeSummary sum;
  for (const gguf::TensorInfo& t : src->tensors()) {
    const std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    const TypeChoice c = choose_type(*fmt, t.name, t.ne[0], t.n_dims, n_layer, tied, t.type, n_expert);
    if (!c.note.empty() && note) note(t.name + ": " + c.note);
    if (c.type == t.type) {
      w.add_tensor(t.name, t.type, ne, t.data);
      ++sum.n_copied;
      continue;
    }
    if (!can_dequantize(t.type))
      throw Error(in + ": tensor '" + t.name + "': type " + ggml_type_name(t.type) + " cannot be dequantised");
    const gguf::File* file = src.get();
    const uint8_t* data = t.data;
    const uint64_t src_row = t.row_bytes();
    const int64_t n_rows = t.n_rows();
    const GgmlType src_type = t.type;
    const int64_t row_len = t.ne[0];
    auto fill = quantizing_fill(pool, c.type, row_len, [=](int64_t r, float* dst) {
      dequant_row(src_type, data + uint64_t(r) * src_row, dst, row_len);
      // Not every quantiser refuses NaN/inf; a model holding one is corrupt.
      for (int64_t j = 0; j < row_len; ++j)
        if (!std::isfinite(dst[j]))
          throw Error("row " + std::to_string(r) + " element " + std::to_string(j) + " is not finite");
    });
    // Once the last rows are out, the source pages can go (keeps the resident set
    // to about one tensor for models larger than RAM).
    const std::string where = in + ": tensor '" + t.name + "': ";
    w.add_tensor(t.name, c.type, ne, [fill, file, data, src_row, n_rows, where](int64_t r0, int64_t n, uint8_t* dst) {
      try {
        fill(r0, n, dst);
      } catch (const Error& e) {
        throw Error(where + e.what());  // e.g. a non-finite weight
      }
      if (r0 + n == n_rows) file->release_pages(data, src_row * uint64_t(n_rows));
    });
    ++sum.n_requantized;
  }
  w.write(out);
  sum.file_bytes = w.file_size();
  return sum;
}

}  // namespace fish::convert
