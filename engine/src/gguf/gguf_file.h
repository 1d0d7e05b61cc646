// gguf::File: a read-only, memory-mapped GGUF (v2/v3) file.
//
// Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv,
// n_kv × {string key, u32 type, value}, n_tensors × {string name, u32 n_dims,
// u64 ne[n_dims], u32 ggml_type, u64 offset}, padding to general.alignment
// (default 32), then the tensor data; each tensor's offset is relative to the
// start of the data section. Strings are u64 length + bytes (no NUL).
//
// Every count, length, offset, dimension and byte size is checked against the
// file before it is used (overflow-safe); a bad file throws fish::Error with a
// message naming the file and the field. Nothing is copied: strings, arrays and
// tensor data are views into the mapping, valid while the File lives.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/ggml_type.h"

namespace fish::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);
// Bytes of one scalar of this type; 0 for STRING and ARRAY (variable size).
size_t value_type_size(ValueType t);

struct Value;

// An array value: elements are a view into the file (strings pre-split).
struct Array {
  ValueType type = ValueType::UINT8;  // element type
  uint64_t size = 0;
  const uint8_t* data = nullptr;          // numeric/bool elements, packed
  std::vector<std::string_view> strings;  // STRING elements
  std::vector<Value> arrays;         // nested ARRAY elements (rare)

  bool is_numeric() const;
  // Element i as a number (any integer, float or bool type); throws on strings/arrays.
  double number(uint64_t i) const;
  int64_t integer(uint64_t i) const;
  std::string_view string(uint64_t i) const { return strings.at(i); }
};

struct Value {
  ValueType type = ValueType::UINT8;
  uint64_t u = 0;          // unsigned integers and bool
  int64_t i = 0;           // signed integers (also set for unsigned that fit)
  double f = 0;            // floats (also set for every integer)
  std::string_view str;    // STRING
  std::shared_ptr<Array> arr;  // ARRAY

  bool is_integer() const;
  bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the row length (contiguous)
  uint64_t offset = 0;           // from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr; // into the mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t row_bytes() const { return nbytes / uint64_t(n_rows() ? n_rows() : 1); }
  std::string shape_str() const;  // "[2048, 8192]"
};

// Which file on disk a File maps, as the open descriptor saw it (so a file
// replaced after the open is not mistaken for the mapped one): what caches of
// data derived from the file (model/requant_cache.h) are keyed by. All zero for
// an in-memory image.
struct FileIdentity {
  uint64_t device = 0, inode = 0, size = 0, mtime_ns = 0;
};

class File {
 public:
  // Maps and parses the file; throws fish::Error naming the file and field.
  static std::unique_ptr<File> open(const std::string& path);
  // Parses an in-memory image (tests, writer round trips). `name` is used in messages.
  static std::unique_ptr<File> from_bytes(std::vector<uint8_t> bytes, std::string name);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  const FileIdentity& identity() const { return identity_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t size() const { return size_; }
  const uint8_t* bytes() const { return base_; }

  const std::vector<KeyValue>& kvs() const { return kvs_; }
  const Value* find(std::string_view key) const;

  // Typed getters: nullopt when the key is absent; fish::Error naming the key
  // when it is present with an incompatible type (or a value out of range).
  std::optional<uint64_t> get_u64(std::string_view key) const;
  std::optional<int64_t> get_i64(std::string_view key) const;
  std::optional<uint32_t> get_u32(std::string_view key) const;
  std::optional<double> get_f64(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string_view> get_str(std::string_view key) const;
  const Array* get_arr(std::string_view key) const;  // nullptr when absent; throws if not an array

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(std::string_view name) const;

  // Give the pages that lie wholly inside [data, data+nbytes) back to the OS
  // (MADV_DONTNEED; a later read faults them in again from the file).
  void release_pages(const void* data, uint64_t nbytes) const;

 private:
  File() = default;
  void parse();

  std::string path_;
  std::vector<uint8_t> owned_;  // from_bytes
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  FileIdentity identity_;
  bool mapped_ = false;
  int guard_slot_ = -1;  // MappingGuard (SIGBUS on a truncated file -> a clear error)
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kvs_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace fish::gguf
