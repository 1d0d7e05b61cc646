// The corrupt-file corpus: damaged GGUF images generated from a valid small file
// (built with gguf::Writer) and from stories260K.gguf. Every one must be refused
// with fish::Error whose message names the file and the field at fault: never a
// crash, a hang or a huge allocation. CI also runs this under ASan + UBSan
// (-DFISH_SANITIZE=ON).
//
// The expected field of each truncation comes from an independent walk of the
// valid image (Layout below), which records where every header field lies and
// the name the reader gives it.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"

// ---- the largest single allocation, to show no size field is trusted ----------
// (GCC cannot see that this operator new pairs with the operator delete below.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<size_t> g_max_alloc{0};
}
namespace {
void* tracked_alloc(size_t n) noexcept {
  size_t m = g_max_alloc.load(std::memory_order_relaxed);
  while (n > m && !g_max_alloc.compare_exchange_weak(m, n)) {
  }
  return std::malloc(n ? n : 1);
}
void* tracked_alloc_or_throw(size_t n) {
  if (void* p = tracked_alloc(n)) return p;
  throw std::bad_alloc();
}
}  // namespace
// Every replaceable non-aligned form, so new and delete always pair (ASan checks).
void* operator new(size_t n) { return tracked_alloc_or_throw(n); }
void* operator new[](size_t n) { return tracked_alloc_or_throw(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return tracked_alloc(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return tracked_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace fish;

namespace {

constexpr size_t kAllocLimit = size_t(16) << 20;  // far above any image here, far below a trusted 2^40

// ---- an independent walk of a valid image --------------------------------------
struct Field {
  uint64_t off, size;
  std::string label;  // what the reader's message must contain when this field is cut
};
struct TensorSpan {
  std::string name;
  uint64_t info_off;  // where its info (name length) starts
  uint64_t ne_off;    // ne[0]
  uint32_t n_dims;
  uint64_t type_off, offset_off;
  uint64_t offset, nbytes;
};
struct KvSpan {
  std::string key;
  uint64_t key_off;    // key length field
  uint64_t type_off;   // value type tag
  uint64_t value_off;  // the value (for arrays: the element type)
};
struct Layout {
  std::vector<Field> fields;
  std::vector<KvSpan> kvs;
  std::vector<TensorSpan> tensors;
  uint64_t n_kv = 0, n_tensors = 0, header_end = 0, data_offset = 0, alignment = 32;
};

class Walk {
 public:
  Walk(const std::vector<uint8_t>& b, Layout& l) : b_(b), l_(l) {}
  uint64_t pos = 0;
  template <class T>
  T scalar(uint64_t size_check, const std::string& label) {
    REQUIRE(pos + sizeof(T) <= b_.size());
    T v;
    std::memcpy(&v, b_.data() + pos, sizeof v);
    l_.fields.push_back({pos, sizeof(T), label});
    pos += sizeof(T);
    (void)size_check;
    return v;
  }
  uint32_t u32(const std::string& label) { return scalar<uint32_t>(4, label); }
  uint64_t u64(const std::string& label) { return scalar<uint64_t>(8, label); }
  // A string: its length field labelled len_label, its bytes labelled label.
  std::string str(const std::string& len_label, const std::string& label) {
    const uint64_t n = u64(len_label);
    REQUIRE(pos + n <= b_.size());
    if (n) l_.fields.push_back({pos, n, label});
    std::string s(reinterpret_cast<const char*>(b_.data() + pos), size_t(n));
    pos += n;
    return s;
  }
  void value(uint32_t type, const std::string& field, uint64_t* as_int) {
    const size_t es = gguf::value_type_size(gguf::ValueType(type));
    if (type == uint32_t(gguf::ValueType::STRING)) {
      str(field + " length", field);
    } else if (type == uint32_t(gguf::ValueType::ARRAY)) {
      const uint32_t et = u32(field + " array element type");
      const uint64_t n = u64(field + " array length");
      const size_t ees = gguf::value_type_size(gguf::ValueType(et));
      if (ees) {
        if (n) l_.fields.push_back({pos, n * ees, field});
        pos += n * ees;
      } else if (et == uint32_t(gguf::ValueType::STRING)) {
        // The reader may refuse the whole array up front ("array length ... larger
        // than the file allows") or one element: both messages name the key.
        for (uint64_t k = 0; k < n; ++k) str(field, field);
      } else {
        for (uint64_t k = 0; k < n; ++k) value(et, field, nullptr);
      }
    } else {
      uint64_t v = 0;
      std::memcpy(&v, b_.data() + pos, es);
      if (as_int) *as_int = v;
      l_.fields.push_back({pos, es, field});
      pos += es;
    }
  }

 private:
  const std::vector<uint8_t>& b_;
  Layout& l_;
};

Layout walk(const std::vector<uint8_t>& b) {
  Layout l;
  Walk w(b, l);
  l.fields.push_back({0, 4, "magic"});
  w.pos = 4;
  w.u32("version");
  l.n_tensors = w.u64("tensor count");
  l.n_kv = w.u64("metadata count");
  for (uint64_t k = 0; k < l.n_kv; ++k) {
    KvSpan kv;
    kv.key_off = w.pos;
    const std::string where = "metadata[" + std::to_string(k) + "] key";
    kv.key = w.str(where + " length", where);
    const std::string field = "metadata '" + kv.key + "'";
    kv.type_off = w.pos;
    const uint32_t t = w.u32(field + " type");
    kv.value_off = w.pos;
    uint64_t v = 0;
    w.value(t, field, &v);
    if (kv.key == "general.alignment") l.alignment = v;
    l.kvs.push_back(kv);
  }
  for (uint64_t k = 0; k < l.n_tensors; ++k) {
    TensorSpan t;
    t.info_off = w.pos;
    const std::string where = "tensor[" + std::to_string(k) + "] name";
    t.name = w.str(where + " length", where);
    const std::string field = "tensor '" + t.name + "'";
    t.n_dims = w.u32(field + " n_dims");
    t.ne_off = w.pos;
    int64_t ne[4] = {1, 1, 1, 1};
    for (uint32_t d = 0; d < t.n_dims; ++d) ne[d] = int64_t(w.u64(field + " ne[" + std::to_string(d) + "]"));
    t.type_off = w.pos;
    const uint32_t type = w.u32(field + " type");
    t.offset_off = w.pos;
    t.offset = w.u64(field + " offset");
    t.nbytes = *ggml_row_bytes(type, ne[0]) * uint64_t(ne[1] * ne[2] * ne[3]);
    l.tensors.push_back(t);
  }
  l.header_end = w.pos;
  l.data_offset = (w.pos + l.alignment - 1) / l.alignment * l.alignment;
  return l;
}

// The field the reader must name when the image is cut to its first n bytes.
std::string expected_field(const Layout& l, uint64_t n) {
  if (n >= 24) {
    // The counts are checked against the bytes left before anything is reserved.
    const uint64_t left = n - 24;
    if (l.n_kv > left / 13) return "metadata count";
    if (l.n_tensors > left / 24) return "tensor count";
  }
  if (n < l.header_end) {
    for (const Field& f : l.fields)
      if (f.off <= n && n < f.off + f.size) return f.label;
    FAIL("no field covers byte " << n);
  }
  if (n < l.data_offset) return "data section";
  const uint64_t data_size = n - l.data_offset;
  for (const TensorSpan& t : l.tensors)
    if (t.offset > data_size || t.nbytes > data_size - t.offset) return "tensor '" + t.name + "' data";
  FAIL("cut at " << n << " leaves every tensor whole");
  return "";
}

// ---- helpers -------------------------------------------------------------------
void put_u32(std::vector<uint8_t>& b, uint64_t off, uint32_t v) { std::memcpy(b.data() + off, &v, 4); }
void put_u64(std::vector<uint8_t>& b, uint64_t off, uint64_t v) { std::memcpy(b.data() + off, &v, 8); }

// Parses the image; returns the error message (fails the test if it parsed, or
// if the parse allocated more than kAllocLimit at once).
std::string refusal(const std::vector<uint8_t>& img, const std::string& name) {
  g_max_alloc = 0;
  std::string msg;
  try {
    gguf::File::from_bytes(img, name);
  } catch (const Error& e) {
    msg = e.what();
  }
  // from_bytes copies the image once; nothing else may come near the limit.
  CHECK(g_max_alloc.load() <= std::max(kAllocLimit, img.size()));
  return msg;
}

#define CHECK_REFUSED(img, name, ...)                                       \
  do {                                                                      \
    const std::string msg_ = refusal(img, name);                            \
    INFO("message: " << msg_);                                              \
    CHECK_FALSE(msg_.empty());                                              \
    CHECK(msg_.rfind(std::string(name) + ": ", 0) == 0);                    \
    for (const std::string& s_ : std::initializer_list<std::string>{__VA_ARGS__}) \
      CHECK_THAT(msg_, Catch::Contains(s_));                                \
  } while (0)

const std::string kName = "corpus.gguf";

// The valid small image: metadata of every kind the corpus damages, and three
// tensors (Q8_0 [64, 2], F32 [4, 3], F32 [8]).
struct Small {
  std::vector<float> f32 = std::vector<float>(12, 0.25f);
  std::vector<float> norm = std::vector<float>(8, 1.0f);
  std::vector<uint8_t> q8 = std::vector<uint8_t>(2 * 68, 0x11);
};
gguf::Writer small_writer(const Small& s) {
  gguf::Writer w;
  w.set_str("general.architecture", "llama");
  w.set_u32("general.alignment", 32);
  w.set_str("general.name", "corpus");
  w.set_u32("test.keyA", 1);
  w.set_u32("test.keyB", 2);
  w.set_f32_array("test.f32s", {1.f, 2.f, 3.f});
  w.set_str_array("test.strs", {"ab", "cd", "ef"});
  w.add_tensor("w1.weight", GgmlType::Q8_0, {64, 2}, s.q8.data());
  w.add_tensor("w2.weight", GgmlType::F32, {4, 3}, s.f32.data());
  w.add_tensor("n.weight", GgmlType::F32, {8}, s.norm.data());
  return w;
}

const KvSpan& kv_of(const Layout& l, const std::string& key) {
  for (auto& kv : l.kvs)
    if (kv.key == key) return kv;
  FAIL("no key " << key);
  return l.kvs[0];
}
const TensorSpan& tensor_of(const Layout& l, const std::string& name) {
  for (auto& t : l.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return l.tensors[0];
}

// A valid nested array value: depth levels of single-element arrays around [7].
gguf::Value nested(int depth) {
  static const uint32_t seven = 7;
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.arr = std::make_shared<gguf::Array>();
  if (depth == 1) {
    v.arr->type = gguf::ValueType::UINT32;
    v.arr->size = 1;
    v.arr->data = reinterpret_cast<const uint8_t*>(&seven);
  } else {
    v.arr->type = gguf::ValueType::ARRAY;
    v.arr->size = 1;
    v.arr->arrays.push_back(nested(depth - 1));
  }
  return v;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Every cut of the image in [0, end): refused, naming the file and the field.
void check_truncations(const std::vector<uint8_t>& img, const Layout& l, const std::string& name, uint64_t end,
                       uint64_t step) {
  int failures = 0;
  for (uint64_t n = 0; n < end && failures < 5; n += step) {
    const std::string want = expected_field(l, n);
    const std::string msg = refusal(std::vector<uint8_t>(img.begin(), img.begin() + long(n)), name);
    const bool ok = msg.rfind(name + ": ", 0) == 0 && msg.find(want) != std::string::npos;
    if (!ok) {
      ++failures;
      FAIL_CHECK("cut at byte " << n << ": expected an error naming '" << want << "', got: " << msg);
    }
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("corrupt gguf: the valid small image parses (the corpus starts from a good file)", "[gguf][corrupt]") {
  Small s;
  const auto img = small_writer(s).write_to_memory();
  auto f = gguf::File::from_bytes(img, kName);
  CHECK(f->tensors().size() == 3);
  const Layout l = walk(img);
  CHECK(l.header_end <= img.size());
  CHECK(l.data_offset == f->data_offset());
  CHECK(l.tensors.size() == 3);
  CHECK(l.kvs.size() == 7);
  // The allocation tracker sees allocations (so its limit checks mean something).
  g_max_alloc = 0;
  std::vector<uint8_t> probe(size_t(3) << 20);
  CHECK(g_max_alloc.load() >= probe.size());
}

TEST_CASE("corrupt gguf: truncation at every byte and at every field start", "[gguf][corrupt]") {
  Small s;
  const auto img = small_writer(s).write_to_memory();
  const Layout l = walk(img);
  SECTION("small image, every byte of the file") { check_truncations(img, l, kName, img.size(), 1); }
  SECTION("small image, the start of every header field") {
    for (const Field& fd : l.fields) {
      INFO("field " << fd.label << " at " << fd.off);
      const std::string msg = refusal(std::vector<uint8_t>(img.begin(), img.begin() + long(fd.off)), kName);
      CHECK(msg.rfind(kName + ": ", 0) == 0);
      CHECK_THAT(msg, Catch::Contains(expected_field(l, fd.off)));
    }
  }
  SECTION("stories260K, every byte of the header, and inside every tensor's data") {
    const std::string name = "stories260K.gguf";
    const auto real = read_file(test::model_path(name));
    const Layout rl = walk(real);
    REQUIRE(rl.tensors.size() == 48);
    check_truncations(real, rl, name, rl.data_offset, 1);
    for (const TensorSpan& t : rl.tensors) {
      const uint64_t cut = rl.data_offset + t.offset + t.nbytes - 1;
      const std::string msg = refusal(std::vector<uint8_t>(real.begin(), real.begin() + long(cut)), name);
      CHECK_THAT(msg, Catch::Contains(expected_field(rl, cut)) && Catch::Contains("past the end"));
    }
  }
}

TEST_CASE("corrupt gguf: absurd counts and lengths", "[gguf][corrupt]") {
  Small s;
  const auto img = small_writer(s).write_to_memory();
  const Layout l = walk(img);
  const auto real = read_file(test::model_path("stories260K.gguf"));
  for (uint64_t big : {uint64_t(1) << 63, uint64_t(1) << 40, ~uint64_t(0)}) {
    INFO("value " << big);
    for (const auto* src : {&img, &real}) {
      const std::string name = src == &img ? kName : "stories260K.gguf";
      auto b = *src;
      put_u64(b, 8, big);
      CHECK_REFUSED(b, name, "tensor count", "larger than the file allows");
      b = *src;
      put_u64(b, 16, big);
      CHECK_REFUSED(b, name, "metadata count", "larger than the file allows");
    }
    auto b = img;
    put_u64(b, kv_of(l, "general.name").key_off, big);
    CHECK_REFUSED(b, kName, "metadata[2] key", "runs past the end");
    b = img;
    put_u64(b, kv_of(l, "general.name").value_off, big);
    CHECK_REFUSED(b, kName, "metadata 'general.name'", "runs past the end");
    b = img;
    put_u64(b, kv_of(l, "test.f32s").value_off + 4, big);
    CHECK_REFUSED(b, kName, "metadata 'test.f32s'", "runs past the end");
    b = img;
    put_u64(b, kv_of(l, "test.strs").value_off + 4, big);
    CHECK_REFUSED(b, kName, "metadata 'test.strs'", "larger than the file allows");
    b = img;
    put_u64(b, kv_of(l, "test.strs").value_off + 12, big);  // the first element's length
    CHECK_REFUSED(b, kName, "metadata 'test.strs'[0]", "runs past the end");
    b = img;
    put_u64(b, tensor_of(l, "w2.weight").info_off, big);
    CHECK_REFUSED(b, kName, "tensor[1] name", "runs past the end");
    // stories260K's 512-token vocabulary, claiming 2^40 / 2^63 tokens.
    const Layout rl = walk(real);
    b = real;
    put_u64(b, kv_of(rl, "tokenizer.ggml.tokens").value_off + 4, big);
    CHECK_REFUSED(b, "stories260K.gguf", "metadata 'tokenizer.ggml.tokens'", "larger than the file allows");
    b = real;
    put_u64(b, kv_of(rl, "tokenizer.ggml.scores").value_off + 4, big);
    CHECK_REFUSED(b, "stories260K.gguf", "metadata 'tokenizer.ggml.scores'", "runs past the end");
  }
}

TEST_CASE("corrupt gguf: bad versions and magic", "[gguf][corrupt]") {
  Small s;
  const auto img = small_writer(s).write_to_memory();
  auto b = img;
  put_u32(b, 4, 1);
  CHECK_REFUSED(b, kName, "version", "version 1 is not supported");
  put_u32(b, 4, 4);
  CHECK_REFUSED(b, kName, "version", "unsupported GGUF version 4");
  put_u32(b, 4, 0);
  CHECK_REFUSED(b, kName, "version", "unsupported GGUF version 0");
  put_u32(b, 4, 0x03000000u);  // 3 written big-endian
  CHECK_REFUSED(b, kName, "version", "big-endian");
  b = img;
  b[0] = 'g';
  CHECK_REFUSED(b, kName, "magic", "not a GGUF file");
}

TEST_CASE("corrupt gguf: bad tensor infos", "[gguf][corrupt]") {
  Small s;
  const auto img = small_writer(s).write_to_memory();
  const Layout l = walk(img);
  const TensorSpan& w1 = tensor_of(l, "w1.weight");  // Q8_0 [64, 2]
  const TensorSpan& w2 = tensor_of(l, "w2.weight");  // F32 [4, 3]
  auto b = img;

  for (uint32_t nd : {0u, 5u, 0xffffffffu}) {
    b = img;
    put_u32(b, w1.ne_off - 4, nd);
    CHECK_REFUSED(b, kName, "tensor 'w1.weight'", "n_dims " + std::to_string(nd));
  }
  // Dimensions whose product overflows int64 (and so any byte count).
  b = img;
  put_u64(b, w1.ne_off, uint64_t(1) << 32);
  put_u64(b, w1.ne_off + 8, uint64_t(1) << 32);
  CHECK_REFUSED(b, kName, "tensor 'w1.weight'", "element count overflows");
  b = img;
  put_u64(b, w2.ne_off, 3);
  put_u64(b, w2.ne_off + 8, uint64_t(1) << 62);
  CHECK_REFUSED(b, kName, "tensor 'w2.weight'", "overflows");
  // Negative dimensions (as u64 on disk).
  for (uint64_t neg : {~uint64_t(0), uint64_t(1) << 63}) {
    b = img;
    put_u64(b, w2.ne_off + 8, neg);
    CHECK_REFUSED(b, kName, "tensor 'w2.weight'", "dimension 1 is negative");
  }
  // Unknown tensor types (4 and 5 were retired by ggml; 99 never existed).
  for (uint32_t t : {4u, 5u, 99u, 0xffffffffu}) {
    b = img;
    put_u32(b, w2.type_off, t);
    CHECK_REFUSED(b, kName, "tensor 'w2.weight'", "unknown tensor type " + std::to_string(t));
  }
  // fish's own device layout (FQ3 = 1000) is known to the engine but never a
  // GGUF type: refused as such, before its geometry is even looked at.
  b = img;
  put_u32(b, w2.type_off, uint32_t(GgmlType::FQ3));
  CHECK_REFUSED(b, kName, "tensor 'w2.weight'", "tensor type 1000 (FQ3) is fish's own device layout");
  b = img;
  put_u64(b, w1.ne_off, 256);  // a shape FQ3's geometry would accept
  put_u32(b, w1.type_off, uint32_t(GgmlType::FQ3));
  CHECK_REFUSED(b, kName, "tensor 'w1.weight'", "never a GGUF tensor type");
  // Row length not a multiple of the block size.
  b = img;
  put_u64(b, w1.ne_off, 48);
  CHECK_REFUSED(b, kName, "tensor 'w1.weight'", "row length 48 is not a multiple of Q8_0's block size 32");
  b = img;
  put_u32(b, w2.type_off, uint32_t(GgmlType::Q4_K));
  CHECK_REFUSED(b, kName, "tensor 'w2.weight'", "block size 256");
  // Offsets past the end (aligned, so only the bounds check can catch them).
  for (uint64_t off : {uint64_t(1) << 20, uint64_t(1) << 63, ~uint64_t(31)}) {
    b = img;
    put_u64(b, w2.offset_off, off);
    CHECK_REFUSED(b, kName, "tensor 'w2.weight' data", "past the end");
  }
  // The last tensor ending one byte past the file.
  b = img;
  put_u64(b, tensor_of(l, "n.weight").offset_off, tensor_of(l, "n.weight").offset + 32);
  b.resize(b.size() + 31);
  CHECK_REFUSED(b, kName, "tensor 'n.weight' data", "past the end");
  // Misaligned offsets.
  for (uint64_t delta : {1u, 4u, 16u}) {
    b = img;
    put_u64(b, w2.offset_off, w2.offset + delta);
    CHECK_REFUSED(b, kName, "tensor 'w2.weight'", "is not a multiple of the alignment 32");
  }
  // Duplicate tensor names: "w2.weight" renamed "w1.weight".
  b = img;
  b[w2.info_off + 8 + 1] = '1';
  CHECK_REFUSED(b, kName, "tensor 'w1.weight'", "duplicate tensor name");
}

TEST_CASE("corrupt gguf: bad metadata", "[gguf][corrupt]") {
  Small s;
  const auto img = small_writer(s).write_to_memory();
  const Layout l = walk(img);
  auto b = img;

  // Duplicate keys: "test.keyB" renamed "test.keyA".
  b[kv_of(l, "test.keyB").key_off + 8 + 8] = 'A';
  CHECK_REFUSED(b, kName, "metadata 'test.keyA'", "duplicate key");
  // Unknown value types.
  for (uint32_t t : {13u, 0xffffffffu}) {
    b = img;
    put_u32(b, kv_of(l, "test.keyA").type_off, t);
    CHECK_REFUSED(b, kName, "metadata 'test.keyA'", "unknown value type " + std::to_string(t));
    b = img;
    put_u32(b, kv_of(l, "test.f32s").value_off, t);
    CHECK_REFUSED(b, kName, "metadata 'test.f32s'", "unknown array element type");
  }
  // general.alignment 0, 3, 2^31.
  for (uint32_t a : {0u, 3u, 48u, 0x80000000u}) {
    b = img;
    put_u32(b, kv_of(l, "general.alignment").value_off, a);
    CHECK_REFUSED(b, kName, "metadata 'general.alignment'", "power of two", std::to_string(a));
  }
  // general.alignment as a string and as a float: written under a stand-in key of
  // the same length, which is then renamed.
  for (int as_float = 0; as_float < 2; ++as_float) {
    gguf::Writer w = small_writer(s);
    w.remove("general.alignment");
    if (as_float) w.set_f32("general.alignmenX", 32.f);
    else w.set_str("general.alignmenX", "32");
    auto c = w.write_to_memory();
    const Layout cl = walk(c);
    c[kv_of(cl, "general.alignmenX").key_off + 8 + 16] = 't';
    CHECK_REFUSED(c, kName, "metadata 'general.alignment'", as_float ? "float32" : "string");
  }
  // Nested arrays: 8 levels are read, 9 are refused, and a nested array claiming
  // 2^40 elements is refused before anything is reserved.
  {
    gguf::Writer w = small_writer(s);
    w.set_value("test.deep", nested(8));
    auto f = gguf::File::from_bytes(w.write_to_memory(), kName);
    CHECK(f->get_arr("test.deep")->arrays.size() == 1);
    w.set_value("test.deep", nested(9));
    CHECK_REFUSED(w.write_to_memory(), kName, "metadata 'test.deep'", "nested deeper than 8");
    w.set_value("test.deep", nested(2));
    auto c = w.write_to_memory();
    CHECK(gguf::File::from_bytes(c, kName)->get_arr("test.deep")->arrays[0].arr->integer(0) == 7);
    put_u64(c, kv_of(walk(c), "test.deep").value_off + 4, uint64_t(1) << 40);
    CHECK_REFUSED(c, kName, "metadata 'test.deep'", "larger than the file allows");
  }
}
