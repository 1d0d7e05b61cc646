#include "convert/row_fill.h"

#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "quant/quant.h"

namespace fish::convert {

gguf::Writer::RowFill quantizing_fill(ThreadPool& pool, GgmlType type, int64_t row_len, MakeRow make_row) {
  quantize_row_fn(type);  // throws now for a type fish cannot write
  const uint64_t row_bytes = *ggml_row_bytes(uint32_t(type), row_len);
  auto make = std::make_shared<MakeRow>(std::move(make_row));
  return [&pool, type, row_bytes, row_len, make](int64_t row0, int64_t n_rows, uint8_t* dst) {
    std::exception_ptr error;
    std::mutex mu;
    pool.parallel_for(n_rows, 1, [&](int64_t b, int64_t e, int) {
      try {
        std::vector<float> row(static_cast<size_t>(row_len));
        for (int64_t r = b; r < e; ++r) {
          (*make)(row0 + r, row.data());
          // quantize_row refuses non-finite input with a message (the raw kernels would not).
          quantize_row(type, row.data(), dst + uint64_t(r) * row_bytes, row_len);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!error) error = std::current_exception();
      }
    });
    if (error) std::rethrow_exception(error);
  };
}

}  // namespace fish::convert

