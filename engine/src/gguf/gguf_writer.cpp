#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace fish::gguf {

namespace {

// Little-endian encoders (the hosts fish supports are little-endian, so a plain
// memcpy of the scalar is the LE encoding).
template <class T>
void put_scalar(std::vector<uint8_t>& b, T v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& b, std::string_view s) {
  put_scalar<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Encodes the payload of v (no type tag): scalars, strings, arrays (nested ones
// recursively) exactly as gguf::File parsed them.
void encode_value(std::vector<uint8_t>& b, const Value& v, int depth) {
  switch (v.type) {
    case ValueType::UINT8: put_scalar<uint8_t>(b, uint8_t(v.u)); break;
    case ValueType::INT8: put_scalar<int8_t>(b, int8_t(v.i)); break;
    case ValueType::UINT16: put_scalar<uint16_t>(b, uint16_t(v.u)); break;
    case ValueType::INT16: put_scalar<int16_t>(b, int16_t(v.i)); break;
    case ValueType::UINT32: put_scalar<uint32_t>(b, uint32_t(v.u)); break;
    case ValueType::INT32: put_scalar<int32_t>(b, int32_t(v.i)); break;
    case ValueType::UINT64: put_scalar<uint64_t>(b, v.u); break;
    case ValueType::INT64: put_scalar<int64_t>(b, v.i); break;
    case ValueType::FLOAT32: put_scalar<float>(b, float(v.f)); break;
    case ValueType::FLOAT64: put_scalar<double>(b, v.f); break;
    case ValueType::BOOL: put_scalar<uint8_t>(b, v.u ? 1 : 0); break;
    case ValueType::STRING: put_string(b, v.str); break;
    case ValueType::ARRAY: {
      if (!v.arr) throw Error("GGUF writer: array value without elements");
      const Array& a = *v.arr;
      put_scalar<uint32_t>(b, uint32_t(a.type));
      put_scalar<uint64_t>(b, a.size);
      if (const size_t es = value_type_size(a.type)) {
        if (a.size && !a.data) throw Error("GGUF writer: numeric array without data");
        b.insert(b.end(), a.data, a.data + a.size * es);
      } else if (a.type == ValueType::STRING) {
        if (a.strings.size() != a.size) throw Error("GGUF writer: string array size mismatch");
        for (auto s : a.strings) put_string(b, s);
      } else {
        if (a.arrays.size() != a.size) throw Error("GGUF writer: nested array size mismatch");
        for (const Value& e : a.arrays) {
          if (e.type != ValueType::ARRAY) throw Error("GGUF writer: nested array element is not an array");
          encode_value(b, e, depth + 1);
        }
      }
      break;
    }
  }
}

}  // namespace

// Where the bytes go: a file (buffered small writes, large ones straight through)
// or a vector.
class Writer::Sink {
 public:
  virtual ~Sink() = default;
  virtual void put(const void* p, size_t n) = 0;
  void zeros(uint64_t n) {
    static const uint8_t z[256] = {};
    while (n) {
      const size_t k = size_t(std::min<uint64_t>(n, sizeof z));
      put(z, k);
      n -= k;
    }
  }
};

namespace {

class MemSink final : public Writer::Sink {
 public:
  explicit MemSink(std::vector<uint8_t>& v) : v_(v) {}
  void put(const void* p, size_t n) override {
    const auto* b = static_cast<const uint8_t*>(p);
    v_.insert(v_.end(), b, b + n);
  }

 private:
  std::vector<uint8_t>& v_;
};

class FileSink final : public Writer::Sink {
 public:
  explicit FileSink(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(path_ + ": cannot create: " + std::strerror(errno));
    buf_.reserve(kBuf);
  }
  ~FileSink() override {
    if (fd_ >= 0) ::close(fd_);
  }
  void put(const void* p, size_t n) override {
    if (buf_.size() + n <= kBuf) {
      const auto* b = static_cast<const uint8_t*>(p);
      buf_.insert(buf_.end(), b, b + n);
      return;
    }
    flush();
    if (n >= kBuf) raw_write(p, n);
    else put(p, n);
  }
  void close() {
    flush();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw Error(path_ + ": write failed on close: " + std::strerror(errno));
  }

 private:
  static constexpr size_t kBuf = size_t(1) << 20;
  void flush() {
    if (!buf_.empty()) raw_write(buf_.data(), buf_.size());
    buf_.clear();
  }
  void raw_write(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    while (n) {
      const ssize_t w = ::write(fd_, b, std::min<size_t>(n, size_t(1) << 30));
      if (w < 0) {
        if (errno == EINTR) continue;
        throw Error(path_ + ": write failed: " + std::strerror(errno));
      }
      b += w;
      n -= size_t(w);
    }
  }
  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> buf_;
};

}  // namespace

// ---- metadata -----------------------------------------------------------------

void Writer::put_kv(std::string_view key, ValueType type, std::vector<uint8_t> payload) {
  for (auto& kv : kvs_)
    if (kv.key == key) {
      kv.type = type;
      kv.payload = std::move(payload);
      return;
    }
  kvs_.push_back(Kv{std::string(key), type, std::move(payload)});
}

#define FISH_GGUF_SETTER(fn, T, VT)                      \
  void Writer::fn(std::string_view key, T v) {           \
    std::vector<uint8_t> b;                              \
    put_scalar<T>(b, v);                                 \
    put_kv(key, ValueType::VT, std::move(b));            \
  }
FISH_GGUF_SETTER(set_u8, uint8_t, UINT8)
FISH_GGUF_SETTER(set_i8, int8_t, INT8)
FISH_GGUF_SETTER(set_u16, uint16_t, UINT16)
FISH_GGUF_SETTER(set_i16, int16_t, INT16)
FISH_GGUF_SETTER(set_u32, uint32_t, UINT32)
FISH_GGUF_SETTER(set_i32, int32_t, INT32)
FISH_GGUF_SETTER(set_u64, uint64_t, UINT64)
FISH_GGUF_SETTER(set_i64, int64_t, INT64)
FISH_GGUF_SETTER(set_f32, float, FLOAT32)
FISH_GGUF_SETTER(set_f64, double, FLOAT64)
#undef FISH_GGUF_SETTER

void Writer::set_bool(std::string_view key, bool v) {
  put_kv(key, ValueType::BOOL, std::vector<uint8_t>{uint8_t(v ? 1 : 0)});
}

void Writer::set_str(std::string_view key, std::string_view v) {
  std::vector<uint8_t> b;
  put_string(b, v);
  put_kv(key, ValueType::STRING, std::move(b));
}

void Writer::set_str_array(std::string_view key, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  size_t total = 12;
  for (auto& s : v) total += 8 + s.size();
  b.reserve(total);
  put_scalar<uint32_t>(b, uint32_t(ValueType::STRING));
  put_scalar<uint64_t>(b, v.size());
  for (auto& s : v) put_string(b, s);
  put_kv(key, ValueType::ARRAY, std::move(b));
}

void Writer::set_array_raw(std::string_view key, ValueType elem, const void* data, uint64_t n) {
  const size_t es = value_type_size(elem);
  if (!es)
    throw Error("GGUF writer: metadata '" + std::string(key) + "': set_array_raw needs a numeric element type, got " +
                value_type_name(elem));
  std::vector<uint8_t> b;
  b.reserve(12 + n * es);
  put_scalar<uint32_t>(b, uint32_t(elem));
  put_scalar<uint64_t>(b, n);
  const auto* p = static_cast<const uint8_t*>(data);
  b.insert(b.end(), p, p + n * es);
  put_kv(key, ValueType::ARRAY, std::move(b));
}

void Writer::set_f32_array(std::string_view key, const std::vector<float>& v) {
  set_array_raw(key, ValueType::FLOAT32, v.data(), v.size());
}

void Writer::set_i32_array(std::string_view key, const std::vector<int32_t>& v) {
  set_array_raw(key, ValueType::INT32, v.data(), v.size());
}

void Writer::set_value(std::string_view key, const Value& v) {
  std::vector<uint8_t> b;
  encode_value(b, v, 0);
  put_kv(key, v.type, std::move(b));
}

bool Writer::has(std::string_view key) const {
  return std::any_of(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
}

bool Writer::remove(std::string_view key) {
  auto it = std::find_if(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
  if (it == kvs_.end()) return false;
  kvs_.erase(it);
  return true;
}

// ---- tensors ------------------------------------------------------------------

Writer::Tensor& Writer::new_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne) {
  const std::string where = "GGUF writer: tensor '" + std::string(name) + "'";
  if (name.empty()) throw Error("GGUF writer: empty tensor name");
  for (auto& t : tensors_)
    if (t.name == name) throw Error(where + ": added twice");
  if (ne.empty() || ne.size() > 4) throw Error(where + ": " + std::to_string(ne.size()) + " dimensions (must be 1..4)");
  const auto info = ggml_type_info(type);
  if (!info) throw Error(where + ": unknown type " + std::to_string(uint32_t(type)));
  if (!ggml_type_in_gguf(type))
    throw Error(where + ": type " + info->name + " is fish's own device layout, not a GGUF tensor type");
  int64_t rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) throw Error(where + ": dimension " + std::to_string(d) + " is negative");
    if (d > 0) {
      if (ne[d] != 0 && rows > (int64_t(1) << 62) / ne[d]) throw Error(where + ": element count overflows");
      rows *= ne[d];
    }
  }
  const auto row = ggml_row_bytes(uint32_t(type), ne[0]);
  if (!row)
    throw Error(where + ": row length " + std::to_string(ne[0]) + " is not a multiple of " + info->name +
                "'s block size " + std::to_string(info->block_size));
  if (rows && *row > (uint64_t(1) << 62) / uint64_t(rows)) throw Error(where + ": byte size overflows");
  Tensor t;
  t.name = std::string(name);
  t.type = type;
  t.ne = ne;
  t.row_bytes = *row;
  t.n_rows = rows;
  t.nbytes = *row * uint64_t(rows);
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

void Writer::add_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne, const void* data) {
  Tensor& t = new_tensor(name, type, ne);
  if (!data && t.nbytes) {
    tensors_.pop_back();
    throw Error("GGUF writer: tensor '" + std::string(name) + "': no data");
  }
  t.data = data;
}

void Writer::add_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne, RowFill fill) {
  Tensor& t = new_tensor(name, type, ne);
  if (!fill) {
    tensors_.pop_back();
    throw Error("GGUF writer: tensor '" + std::string(name) + "': no fill function");
  }
  t.fill = std::move(fill);
}

void Writer::set_version(uint32_t v) {
  if (v != 2 && v != 3) throw Error("GGUF writer: version " + std::to_string(v) + " (only 2 and 3 are written)");
  version_ = v;
}

// ---- layout and output --------------------------------------------------------

uint64_t Writer::alignment() const {
  for (auto& kv : kvs_) {
    if (kv.key != "general.alignment") continue;
    const size_t es = value_type_size(kv.type);
    const bool is_int = es && kv.type != ValueType::FLOAT32 && kv.type != ValueType::FLOAT64 &&
                        kv.type != ValueType::BOOL;
    uint64_t a = 0;
    if (is_int) {
      std::memcpy(&a, kv.payload.data(), es);  // LE: the low bytes of a
      const bool is_signed = kv.type == ValueType::INT8 || kv.type == ValueType::INT16 ||
                             kv.type == ValueType::INT32 || kv.type == ValueType::INT64;
      if (is_signed && (kv.payload[es - 1] & 0x80)) a = 0;
    }
    if (!is_int || a == 0 || a > (uint64_t(1) << 30) || (a & (a - 1)) != 0)
      throw Error("GGUF writer: metadata 'general.alignment': must be a power of two integer");
    return a;
  }
  return 32;
}

std::vector<uint8_t> Writer::header_bytes(uint64_t align) const {
  std::vector<uint8_t> h;
  h.reserve(4096);
  put_scalar<uint32_t>(h, 0x46554747u);  // "GGUF" read as a little-endian u32
  put_scalar<uint32_t>(h, version_);
  put_scalar<uint64_t>(h, tensors_.size());
  put_scalar<uint64_t>(h, kvs_.size());
  for (auto& kv : kvs_) {
    put_string(h, kv.key);
    put_scalar<uint32_t>(h, uint32_t(kv.type));
    h.insert(h.end(), kv.payload.begin(), kv.payload.end());
  }
  uint64_t off = 0;
  for (auto& t : tensors_) {
    put_string(h, t.name);
    put_scalar<uint32_t>(h, uint32_t(t.ne.size()));
    for (int64_t d : t.ne) put_scalar<uint64_t>(h, uint64_t(d));
    put_scalar<uint32_t>(h, uint32_t(t.type));
    put_scalar<uint64_t>(h, off);
    off = align_up(off + t.nbytes, align);
  }
  return h;
}

uint64_t Writer::file_size() const {
  const uint64_t align = alignment();
  // A file without tensors ends right after the header (as llama.cpp writes it).
  uint64_t size = header_bytes(align).size();
  if (!tensors_.empty()) size = align_up(size, align);
  for (size_t k = 0; k < tensors_.size(); ++k) {
    size += tensors_[k].nbytes;
    if (k + 1 < tensors_.size()) size = align_up(size, align);
  }
  return size;
}

void Writer::emit(Sink& out) const {
  const uint64_t align = alignment();
  const std::vector<uint8_t> h = header_bytes(align);
  out.put(h.data(), h.size());
  if (!tensors_.empty()) out.zeros(align_up(h.size(), align) - h.size());
  std::vector<uint8_t> chunk;
  uint64_t done = 0, total = 0;
  for (const Tensor& t : tensors_) total += t.nbytes;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Tensor& t = tensors_[k];
    if (t.data) {
      out.put(t.data, size_t(t.nbytes));
      if (progress_) progress_(done += t.nbytes, total);
    } else if (t.nbytes) {
      // Rows per call: as many as fit in chunk_bytes_, at least one.
      const int64_t per = int64_t(std::max<uint64_t>(1, std::min<uint64_t>(chunk_bytes_ / t.row_bytes, uint64_t(t.n_rows))));
      chunk.resize(size_t(uint64_t(per) * t.row_bytes));
      for (int64_t r = 0; r < t.n_rows; r += per) {
        const int64_t n = std::min<int64_t>(per, t.n_rows - r);
        t.fill(r, n, chunk.data());
        out.put(chunk.data(), size_t(uint64_t(n) * t.row_bytes));
        if (progress_) progress_(done += uint64_t(n) * t.row_bytes, total);
      }
    }
    // Pad to the next tensor's offset (no padding after the last tensor).
    if (k + 1 < tensors_.size()) out.zeros(align_up(t.nbytes, align) - t.nbytes);
  }
}

void Writer::write(const std::string& path) const {
  alignment();  // validate before creating anything
  // The .tmp is renamed over PATH: never over a device, FIFO, directory or
  // socket (as root, "quantize IN /dev/full" would replace the device node).
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw Error(path + ": exists and is not a regular file; fish writes a new file or replaces a regular one");
  const std::string tmp = path + ".tmp";
  try {
    FileSink f(tmp);
    emit(f);
    f.close();
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error(path + ": cannot rename " + tmp + " to it: " + std::strerror(errno));
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

std::vector<uint8_t> Writer::write_to_memory() const {
  std::vector<uint8_t> v;
  v.reserve(size_t(file_size()));
  MemSink m(v);
  emit(m);
  return v;
}

}  // namespace fish::gguf
