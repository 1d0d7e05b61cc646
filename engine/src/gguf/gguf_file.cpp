#include "gguf/gguf_file.h"
#include "gguf/mapping_guard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace fish::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    default: return 0;
  }
}

namespace {

bool valid_value_type(uint32_t t) { return t <= uint32_t(ValueType::FLOAT64); }

// Decodes one scalar of type t at p (little-endian, unaligned) into v.
void decode_scalar(ValueType t, const uint8_t* p, Value& v) {
  v.type = t;
  auto rd = [&](auto tag) { decltype(tag) x; std::memcpy(&x, p, sizeof x); return x; };
  switch (t) {
    case ValueType::UINT8: v.u = rd(uint8_t{}); break;
    case ValueType::UINT16: v.u = rd(uint16_t{}); break;
    case ValueType::UINT32: v.u = rd(uint32_t{}); break;
    case ValueType::UINT64: v.u = rd(uint64_t{}); break;
    case ValueType::BOOL: v.u = rd(uint8_t{}) != 0; break;
    case ValueType::INT8: v.i = rd(int8_t{}); break;
    case ValueType::INT16: v.i = rd(int16_t{}); break;
    case ValueType::INT32: v.i = rd(int32_t{}); break;
    case ValueType::INT64: v.i = rd(int64_t{}); break;
    case ValueType::FLOAT32: v.f = rd(float{}); break;
    case ValueType::FLOAT64: v.f = rd(double{}); break;
    default: break;
  }
  switch (t) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32:
    case ValueType::UINT64: case ValueType::BOOL:
      v.i = v.u <= uint64_t(std::numeric_limits<int64_t>::max()) ? int64_t(v.u) : 0;
      v.f = double(v.u);
      break;
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
      v.u = v.i >= 0 ? uint64_t(v.i) : 0;
      v.f = double(v.i);
      break;
    default: break;
  }
}

// A bounds-checked cursor over the file image. Every read names the field it
// reads so a failure says what was being parsed.
class Reader {
 public:
  Reader(const uint8_t* p, uint64_t n, const std::string& path) : p_(p), n_(n), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return n_ - pos_; }

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw Error(path_ + ": " + field + ": " + why + " (at byte " + std::to_string(pos_) + " of " +
                std::to_string(n_) + ")");
  }
  const uint8_t* need(uint64_t bytes, const std::string& field) {
    if (bytes > left())
      fail(field, "file truncated: needs " + std::to_string(bytes) + " bytes, " +
                      std::to_string(left()) + " left");
    const uint8_t* r = p_ + pos_;
    pos_ += bytes;
    return r;
  }
  uint32_t u32(const std::string& field) { uint32_t v; std::memcpy(&v, need(4, field), 4); return v; }
  uint64_t u64(const std::string& field) { uint64_t v; std::memcpy(&v, need(8, field), 8); return v; }
  std::string_view str(const std::string& field) {
    const uint64_t len = u64(field + " length");
    if (len > left())
      fail(field, "string length " + std::to_string(len) + " runs past the end of the file");
    const uint8_t* s = need(len, field);
    return {reinterpret_cast<const char*>(s), size_t(len)};
  }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

constexpr int kMaxArrayDepth = 8;

void read_value(Reader& r, ValueType t, Value& v, const std::string& field, int depth);

void read_array(Reader& r, Value& v, const std::string& field, int depth) {
  if (depth >= kMaxArrayDepth) r.fail(field, "arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  const uint32_t et = r.u32(field + " array element type");
  if (!valid_value_type(et)) r.fail(field, "unknown array element type " + std::to_string(et));
  const uint64_t n = r.u64(field + " array length");
  auto arr = std::make_shared<Array>();
  arr->type = ValueType(et);
  arr->size = n;
  const size_t es = value_type_size(arr->type);
  if (es) {
    if (n > r.left() / es)
      r.fail(field, "array of " + std::to_string(n) + " " + value_type_name(arr->type) +
                        " runs past the end of the file");
    arr->data = r.need(n * es, field);
  } else {
    // Each string takes at least its 8-byte length; each nested array at least 12 bytes.
    const uint64_t min_each = arr->type == ValueType::STRING ? 8 : 12;
    if (n > r.left() / min_each)
      r.fail(field, "array length " + std::to_string(n) + " is larger than the file allows");
    if (arr->type == ValueType::STRING) {
      arr->strings.reserve(size_t(n));
      for (uint64_t k = 0; k < n; ++k) arr->strings.push_back(r.str(field + "[" + std::to_string(k) + "]"));
    } else {
      arr->arrays.resize(size_t(n));
      for (uint64_t k = 0; k < n; ++k)
        read_value(r, ValueType::ARRAY, arr->arrays[size_t(k)], field + "[" + std::to_string(k) + "]", depth + 1);
    }
  }
  v.type = ValueType::ARRAY;
  v.arr = std::move(arr);
}

void read_value(Reader& r, ValueType t, Value& v, const std::string& field, int depth) {
  if (t == ValueType::STRING) {
    v.type = t;
    v.str = r.str(field);
  } else if (t == ValueType::ARRAY) {
    read_array(r, v, field, depth);
  } else {
    decode_scalar(t, r.need(value_type_size(t), field), v);
  }
}

}  // namespace

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default: return false;
  }
}

bool Array::is_numeric() const { return value_type_size(type) != 0; }

double Array::number(uint64_t k) const {
  if (!is_numeric() || k >= size) throw Error("GGUF array: element " + std::to_string(k) + " is not a number");
  Value v;
  decode_scalar(type, data + k * value_type_size(type), v);
  return v.f;
}

int64_t Array::integer(uint64_t k) const {
  if (!is_numeric() || k >= size) throw Error("GGUF array: element " + std::to_string(k) + " is not a number");
  Value v;
  decode_scalar(type, data + k * value_type_size(type), v);
  if (type == ValueType::FLOAT32 || type == ValueType::FLOAT64) return int64_t(v.f);
  return type == ValueType::UINT64 ? int64_t(v.u) : v.i;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (uint32_t d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  // O_NONBLOCK: a FIFO given as the model must not block the open (it is
  // refused below, as is anything but a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file (" +
                (S_ISDIR(st.st_mode)    ? "a directory"
                 : S_ISFIFO(st.st_mode) ? "a FIFO"
                 : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "not a file") +
                ")");
  }
  f->size_ = uint64_t(st.st_size);
  f->identity_ = FileIdentity{uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size),
                              uint64_t(st.st_mtim.tv_sec) * 1000000000u + uint64_t(st.st_mtim.tv_nsec)};
  if (f->size_ < 8) {
    ::close(fd);
    throw Error(path + ": header: file is " + std::to_string(f->size_) + " bytes, too small to be GGUF");
  }
  void* p = mmap(nullptr, size_t(f->size_), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw Error(path + ": cannot mmap: " + std::strerror(errno));
  f->base_ = static_cast<const uint8_t*>(p);
  f->mapped_ = true;
  f->guard_slot_ = MappingGuard::add(p, f->size_, path);
  f->parse();
  return f;
}

std::unique_ptr<File> File::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  std::unique_ptr<File> f(new File());
  f->path_ = std::move(name);
  f->owned_ = std::move(bytes);
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->parse();
  return f;
}

File::~File() {
  MappingGuard::remove(guard_slot_);
  if (mapped_ && base_) munmap(const_cast<uint8_t*>(base_), size_t(size_));
}

void File::parse() {
  Reader r(base_, size_, path_);
  const uint8_t* magic = r.need(4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) r.fail("magic", "not a GGUF file (no \"GGUF\" magic)");
  version_ = r.u32("version");
  if (version_ == 1)
    r.fail("version", "GGUF version 1 is not supported (v2 and v3 are); re-convert the model with a current converter");
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffff) == 0 && (version_ >> 16) != 0)
      r.fail("version", "big-endian GGUF is not supported (version field " + std::to_string(version_) + ")");
    r.fail("version", "unsupported GGUF version " + std::to_string(version_) + " (v2 and v3 are)");
  }
  const uint64_t n_tensors = r.u64("tensor count");
  const uint64_t n_kv = r.u64("metadata count");
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor
  // info at least 8 + 4 + 4 + 8 bytes. Larger counts cannot fit in the file.
  if (n_kv > r.left() / 13) r.fail("metadata count", std::to_string(n_kv) + " is larger than the file allows");
  if (n_tensors > r.left() / 24) r.fail("tensor count", std::to_string(n_tensors) + " is larger than the file allows");

  kvs_.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string where = "metadata[" + std::to_string(k) + "]";
    std::string key(r.str(where + " key"));
    const std::string field = "metadata '" + key + "'";
    const uint32_t t = r.u32(field + " type");
    if (!valid_value_type(t)) r.fail(field, "unknown value type " + std::to_string(t));
    KeyValue kv;
    kv.key = key;
    read_value(r, ValueType(t), kv.value, field, 0);
    if (kv_index_.count(key)) r.fail(field, "duplicate key");
    kv_index_.emplace(key, kvs_.size());
    kvs_.push_back(std::move(kv));
  }

  if (const Value* a = find("general.alignment")) {
    if (!a->is_integer() || a->u == 0 || a->u > (1u << 30) || (a->u & (a->u - 1)) != 0)
      throw Error(path_ + ": metadata 'general.alignment': must be a power of two integer, got " +
                  (a->is_integer() ? std::to_string(a->u) : std::string(value_type_name(a->type))));
    alignment_ = a->u;
  }

  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo ti;
    const std::string where = "tensor[" + std::to_string(k) + "]";
    ti.name = std::string(r.str(where + " name"));
    const std::string field = "tensor '" + ti.name + "'";
    ti.n_dims = r.u32(field + " n_dims");
    if (ti.n_dims == 0 || ti.n_dims > 4) r.fail(field, "n_dims " + std::to_string(ti.n_dims) + " (must be 1..4)");
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < ti.n_dims; ++d) {
      const uint64_t ne = r.u64(field + " ne[" + std::to_string(d) + "]");
      if (ne > uint64_t(std::numeric_limits<int64_t>::max()))
        r.fail(field, "dimension " + std::to_string(d) + " is negative");
      if (ne != 0 && n_el > (uint64_t(1) << 62) / ne)
        r.fail(field, "element count overflows (dimension " + std::to_string(d) + " = " + std::to_string(ne) + ")");
      n_el *= ne;
      ti.ne[d] = int64_t(ne);
    }
    const uint32_t type = r.u32(field + " type");
    const auto info = ggml_type_info(type);
    if (!info) r.fail(field, "unknown tensor type " + std::to_string(type));
    // fish's own layouts (FQ3 = 1000) exist only in device copies: a file that
    // claims one is not a GGUF file anyone wrote, so it is refused like an
    // unknown type rather than decoded.
    if (!ggml_type_in_gguf(type))
      r.fail(field, "tensor type " + std::to_string(type) + " (" + info->name +
                        ") is fish's own device layout, never a GGUF tensor type");
    ti.type = GgmlType(type);
    if (ti.ne[0] % info->block_size != 0)
      r.fail(field, "row length " + std::to_string(ti.ne[0]) + " is not a multiple of " + info->name +
                        "'s block size " + std::to_string(info->block_size));
    const auto row = ggml_row_bytes(type, ti.ne[0]);
    const uint64_t rows = ti.ne[0] ? n_el / uint64_t(ti.ne[0]) : 0;
    if (!row || (rows && *row > (uint64_t(1) << 62) / rows)) r.fail(field, "byte size overflows");
    ti.nbytes = *row * rows;
    ti.offset = r.u64(field + " offset");
    if (ti.offset % alignment_ != 0)
      r.fail(field, "offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
                        std::to_string(alignment_));
    if (tensor_index_.count(ti.name)) r.fail(field, "duplicate tensor name");
    tensor_index_.emplace(ti.name, tensors_.size());
    tensors_.push_back(std::move(ti));
  }

  const uint64_t header_end = r.pos();
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > size_ && n_tensors > 0)
    throw Error(path_ + ": data section: starts at byte " + std::to_string(data_offset_) +
                " past the end of the file (" + std::to_string(size_) + " bytes)");
  const uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
  for (auto& ti : tensors_) {
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset)
      throw Error(path_ + ": tensor '" + ti.name + "' data: bytes [" + std::to_string(ti.offset) + ", " +
                  std::to_string(ti.offset) + "+" + std::to_string(ti.nbytes) + ") lie past the end of the data section (" +
                  std::to_string(data_size) + " bytes; file truncated?)");
    ti.data = base_ + data_offset_ + ti.offset;
  }
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const Value& v, const char* want) {
  throw Error(path + ": metadata '" + std::string(key) + "': expected " + want + ", found " + value_type_name(v.type));
}
}  // namespace

std::optional<uint64_t> File::get_u64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) wrong_type(path_, key, *v, "an unsigned integer");
  const bool is_signed = v->type == ValueType::INT8 || v->type == ValueType::INT16 ||
                         v->type == ValueType::INT32 || v->type == ValueType::INT64;
  if (is_signed && v->i < 0)
    throw Error(path_ + ": metadata '" + std::string(key) + "': negative value " + std::to_string(v->i));
  return v->u;
}

std::optional<uint32_t> File::get_u32(std::string_view key) const {
  auto v = get_u64(key);
  if (!v) return std::nullopt;
  if (*v > 0xffffffffu)
    throw Error(path_ + ": metadata '" + std::string(key) + "': value " + std::to_string(*v) + " out of range");
  return uint32_t(*v);
}

std::optional<int64_t> File::get_i64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) wrong_type(path_, key, *v, "an integer");
  if (v->type == ValueType::UINT64 && v->u > uint64_t(std::numeric_limits<int64_t>::max()))
    throw Error(path_ + ": metadata '" + std::string(key) + "': value out of range");
  return v->i;
}

std::optional<double> File::get_f64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer() && !v->is_float()) wrong_type(path_, key, *v, "a number");
  return v->f;
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL && !v->is_integer()) wrong_type(path_, key, *v, "a bool");
  return v->u != 0;
}

std::optional<std::string_view> File::get_str(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) wrong_type(path_, key, *v, "a string");
  return v->str;
}

const Array* File::get_arr(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return nullptr;
  if (v->type != ValueType::ARRAY) wrong_type(path_, key, *v, "an array");
  return v->arr.get();
}

const TensorInfo* File::tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void File::release_pages(const void* data, uint64_t nbytes) const {
  if (!mapped_ || !data || nbytes == 0) return;
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t begin = uint64_t(static_cast<const uint8_t*>(data) - base_);
  const uint64_t end = begin + nbytes;
  const uint64_t a = (begin + page - 1) / page * page;
  const uint64_t b = end / page * page;
  if (b > a) madvise(const_cast<uint8_t*>(base_) + a, size_t(b - a), MADV_DONTNEED);
}

}  // namespace fish::gguf
