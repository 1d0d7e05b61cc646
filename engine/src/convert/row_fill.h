// A gguf::Writer::RowFill that makes rows of any quantisable type from float rows,
// in parallel on a thread pool: each thread produces its share of the chunk's rows
// into a private f32 scratch row and quantises it straight into the chunk.
#pragma once
#include <cstdint>
#include <functional>

#include "common/ggml_type.h"
#include "cpu/thread_pool.h"
#include "gguf/gguf_writer.h"

namespace fish::convert {

// make_row(row, dst): writes the row_len floats of row `row` into dst. Called
// concurrently for distinct rows. An exception from it (or from quantising a
// non-finite value) is re-thrown by the fill on the calling thread.
using MakeRow = std::function<void(int64_t row, float* dst)>;

gguf::Writer::RowFill quantizing_fill(ThreadPool& pool, GgmlType type, int64_t row_len, MakeRow make_row);

}  // namespace fish::convert
