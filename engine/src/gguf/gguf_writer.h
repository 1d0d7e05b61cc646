// gguf::Writer: builds a GGUF (v3, little-endian) file from metadata and tensors.
//
// Layout written (the same one gguf::File reads): "GGUF" u32 version, u64
// n_tensors, u64 n_kv, the key-value pairs in the order they were first set,
// the tensor infos in the order added, zero padding to the alignment, then each
// tensor's bytes at an offset (from the data start) that is a multiple of the
// alignment. The alignment is general.alignment when set (a power of two), else 32.
//
// Tensor bytes come either from a pointer (not copied: it must stay valid until
// write() returns) or from a RowFill callback, which the writer calls with
// consecutive row ranges of a bounded size and streams out at once, so a model far
// bigger than RAM can be produced chunk by chunk.
//
// write(path) writes PATH.tmp and renames it over PATH only once everything is on
// disk; any failure removes PATH.tmp and throws fish::Error naming the file, so a
// half-written file never appears under the final name.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ggml_type.h"
#include "gguf/gguf_file.h"

namespace fish::gguf {

class Writer {
 public:
  // Fills rows [row0, row0 + n_rows) of the tensor into dst (n_rows * row bytes).
  // A row is ne[0] elements of the tensor's type; rows run over ne[1..3].
  using RowFill = std::function<void(int64_t row0, int64_t n_rows, uint8_t* dst)>;

  Writer() = default;

  // ---- metadata: setting a key again replaces its value, keeping its place.
  void set_u8(std::string_view key, uint8_t v);
  void set_i8(std::string_view key, int8_t v);
  void set_u16(std::string_view key, uint16_t v);
  void set_i16(std::string_view key, int16_t v);
  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_i64(std::string_view key, int64_t v);
  void set_f32(std::string_view key, float v);
  void set_f64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_str(std::string_view key, std::string_view v);
  void set_str_array(std::string_view key, const std::vector<std::string>& v);
  // n packed little-endian scalars of a numeric/bool element type.
  void set_array_raw(std::string_view key, ValueType elem, const void* data, uint64_t n);
  void set_f32_array(std::string_view key, const std::vector<float>& v);
  void set_i32_array(std::string_view key, const std::vector<int32_t>& v);
  // Any value gguf::File read (nested arrays included), re-encoded as it was.
  void set_value(std::string_view key, const Value& v);
  bool has(std::string_view key) const;
  bool remove(std::string_view key);
  size_t n_kv() const { return kvs_.size(); }

  // ---- tensors, written in the order added. ne[0] is the row length and must
  // be a multiple of the type's block size; 1 to 4 dimensions, none negative.
  void add_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne, const void* data);
  void add_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne, RowFill fill);
  size_t n_tensors() const { return tensors_.size(); }

  // GGUF version written: 3 (default) or 2 (the same layout).
  void set_version(uint32_t v);
  // Upper bound on the bytes of one RowFill call (at least one row is filled).
  void set_chunk_bytes(uint64_t n) { chunk_bytes_ = n ? n : 1; }
  // Called while write() runs, after each tensor chunk: (tensor bytes written, all tensor bytes).
  using Progress = std::function<void(uint64_t done, uint64_t total)>;
  void set_progress(Progress p) { progress_ = std::move(p); }

  // The alignment the file will use (validates general.alignment; throws if bad).
  uint64_t alignment() const;
  // Total bytes of the file that write() produces.
  uint64_t file_size() const;

  // Writes PATH.tmp, then renames it to PATH. Throws fish::Error on failure
  // (PATH.tmp removed, PATH untouched). An exception from a RowFill propagates.
  void write(const std::string& path) const;
  // The same bytes, in memory (tests, small files).
  std::vector<uint8_t> write_to_memory() const;

  class Sink;  // where emit() sends the bytes (a file or a vector; internal)

 private:
  struct Kv {
    std::string key;
    ValueType type;
    std::vector<uint8_t> payload;  // the encoded value, without the type tag
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t row_bytes = 0;
    int64_t n_rows = 0;
    uint64_t nbytes = 0;
    const void* data = nullptr;
    RowFill fill;
  };
  void put_kv(std::string_view key, ValueType type, std::vector<uint8_t> payload);
  Tensor& new_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne);
  std::vector<uint8_t> header_bytes(uint64_t align) const;  // magic .. tensor infos, unpadded
  void emit(Sink& out) const;

  uint32_t version_ = 3;
  Progress progress_;
  uint64_t chunk_bytes_ = uint64_t(64) << 20;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace fish::gguf
