// gguf::Writer: every metadata type and tensor round-trips through gguf::File,
// alignment is honoured, streaming fills give the same bytes as pointers, a failed
// write leaves nothing behind, and every shared model re-written from what the
// reader parsed comes back identical (byte for byte).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"

using namespace fish;
namespace fs = std::filesystem;

namespace {

bool same_value(const gguf::Value& a, const gguf::Value& b);

bool same_array(const gguf::Array& a, const gguf::Array& b) {
  if (a.type != b.type || a.size != b.size) return false;
  if (const size_t es = gguf::value_type_size(a.type)) return std::memcmp(a.data, b.data, a.size * es) == 0;
  if (a.type == gguf::ValueType::STRING) return a.strings == b.strings;
  for (uint64_t k = 0; k < a.size; ++k)
    if (!same_value(a.arrays[k], b.arrays[k])) return false;
  return true;
}

bool same_value(const gguf::Value& a, const gguf::Value& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case gguf::ValueType::STRING: return a.str == b.str;
    case gguf::ValueType::ARRAY: return same_array(*a.arr, *b.arr);
    case gguf::ValueType::FLOAT32:
    case gguf::ValueType::FLOAT64: return std::memcmp(&a.f, &b.f, sizeof a.f) == 0;  // NaN-safe, bit exact
    default: return a.u == b.u && a.i == b.i;
  }
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A writer holding everything f holds (tensor data by pointer into f's mapping).
gguf::Writer copy_of(const gguf::File& f) {
  gguf::Writer w;
  w.set_version(f.version());
  for (auto& kv : f.kvs()) w.set_value(kv.key, kv.value);
  for (auto& t : f.tensors())
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  return w;
}

std::string tmp_dir() {
  const fs::path d = fs::temp_directory_path() / ("fish_gguf_writer_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

}  // namespace

TEST_CASE("gguf writer: every shared model reads back identically after a rewrite", "[gguf][writer]") {
  std::vector<std::string> files;
  for (const char* dir : {"models", "models/vocab"})
    for (auto& e : fs::directory_iterator(test::shared_path(dir)))
      if (e.path().extension() == ".gguf") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 5);

  for (const std::string& path : files) {
    INFO(path);
    auto a = gguf::File::open(path);
    const std::vector<uint8_t> bytes = copy_of(*a).write_to_memory();
    auto b = gguf::File::from_bytes(bytes, path + " (rewritten)");

    CHECK(b->version() == a->version());
    CHECK(b->alignment() == a->alignment());
    REQUIRE(b->kvs().size() == a->kvs().size());
    for (size_t k = 0; k < a->kvs().size(); ++k) {
      INFO("key " << a->kvs()[k].key);
      CHECK(b->kvs()[k].key == a->kvs()[k].key);
      CHECK(same_value(a->kvs()[k].value, b->kvs()[k].value));
    }
    REQUIRE(b->tensors().size() == a->tensors().size());
    for (size_t k = 0; k < a->tensors().size(); ++k) {
      const auto& ta = a->tensors()[k];
      const auto& tb = b->tensors()[k];
      INFO("tensor " << ta.name);
      CHECK(tb.name == ta.name);
      CHECK(tb.type == ta.type);
      CHECK(tb.n_dims == ta.n_dims);
      CHECK(std::equal(ta.ne, ta.ne + 4, tb.ne));
      CHECK(tb.offset == ta.offset);
      REQUIRE(tb.nbytes == ta.nbytes);
      CHECK(std::memcmp(ta.data, tb.data, ta.nbytes) == 0);
    }
    // The shared files were written with the same layout rules, so the whole
    // image comes back byte for byte.
    CHECK(bytes == read_all(path));
  }
}

TEST_CASE("gguf writer: every metadata type round-trips", "[gguf][writer]") {
  gguf::Writer w;
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", 18000000000000000000ull);
  w.set_i64("t.i64", -9000000000000000000ll);
  w.set_f32("t.f32", 1.5e-6f);
  w.set_f64("t.f64", 3.141592653589793);
  w.set_bool("t.bool", true);
  w.set_str("t.str", "héllo ▁world");
  w.set_str_array("t.strs", {"a", "", "<0x0A>", "▁the"});
  w.set_f32_array("t.f32s", {0.f, -1.f, 2.5f});
  w.set_i32_array("t.i32s", {1, -2, 3, -4});
  const uint16_t u16s[3] = {1, 2, 65535};
  w.set_array_raw("t.u16s", gguf::ValueType::UINT16, u16s, 3);
  w.set_u32("t.replaced", 1);
  w.set_str("t.last", "end");
  w.set_str("t.replaced", "now a string");  // keeps its place, changes type
  CHECK(w.has("t.u8"));
  CHECK(w.remove("t.u8"));
  CHECK_FALSE(w.remove("t.u8"));
  CHECK_FALSE(w.has("t.u8"));
  CHECK_THROWS_AS(w.set_array_raw("t.bad", gguf::ValueType::STRING, nullptr, 0), Error);

  auto f = gguf::File::from_bytes(w.write_to_memory(), "mem");
  CHECK(f->version() == 3);
  REQUIRE(f->kvs().size() == 17);  // 18 set, one removed
  CHECK(*f->get_i64("t.i8") == -100);
  CHECK(*f->get_u64("t.u16") == 60000);
  CHECK(*f->get_i64("t.i16") == -30000);
  CHECK(*f->get_u64("t.u32") == 4000000000u);
  CHECK(*f->get_i64("t.i32") == -2000000000);
  CHECK(*f->get_u64("t.u64") == 18000000000000000000ull);
  CHECK(*f->get_i64("t.i64") == -9000000000000000000ll);
  CHECK(float(*f->get_f64("t.f32")) == 1.5e-6f);
  CHECK(*f->get_f64("t.f64") == 3.141592653589793);
  CHECK(*f->get_bool("t.bool"));
  CHECK(*f->get_str("t.str") == "héllo ▁world");
  const gguf::Array* s = f->get_arr("t.strs");
  REQUIRE(s);
  CHECK(s->size == 4);
  CHECK(s->string(1).empty());
  CHECK(s->string(3) == "▁the");
  const gguf::Array* fl = f->get_arr("t.f32s");
  REQUIRE(fl);
  CHECK(fl->type == gguf::ValueType::FLOAT32);
  CHECK(fl->number(2) == 2.5);
  CHECK(f->get_arr("t.i32s")->integer(3) == -4);
  CHECK(f->get_arr("t.u16s")->integer(2) == 65535);
  CHECK(f->kvs()[15].key == "t.replaced");
  CHECK(*f->get_str("t.replaced") == "now a string");
  CHECK(f->kvs()[16].key == "t.last");
}

TEST_CASE("gguf writer: nested arrays are written as they were read", "[gguf][writer]") {
  // [[1, 2], []] of u32 arrays, built as the reader represents it.
  static const uint32_t one_two[2] = {1, 2};
  auto inner0 = std::make_shared<gguf::Array>();
  inner0->type = gguf::ValueType::UINT32;
  inner0->size = 2;
  inner0->data = reinterpret_cast<const uint8_t*>(one_two);
  auto inner1 = std::make_shared<gguf::Array>();
  inner1->type = gguf::ValueType::UINT32;
  auto outer = std::make_shared<gguf::Array>();
  outer->type = gguf::ValueType::ARRAY;
  outer->size = 2;
  outer->arrays.resize(2);
  outer->arrays[0].type = outer->arrays[1].type = gguf::ValueType::ARRAY;
  outer->arrays[0].arr = inner0;
  outer->arrays[1].arr = inner1;
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.arr = outer;
  gguf::Writer w;
  w.set_value("nested", v);
  auto f = gguf::File::from_bytes(w.write_to_memory(), "mem");
  const gguf::Array* a = f->get_arr("nested");
  REQUIRE(a);
  REQUIRE(a->size == 2);
  CHECK(a->arrays[0].arr->integer(1) == 2);
  CHECK(a->arrays[1].arr->size == 0);
}

TEST_CASE("gguf writer: tensors, alignment and streamed fills", "[gguf][writer]") {
  std::vector<float> a(3 * 5);
  std::iota(a.begin(), a.end(), 0.f);
  std::vector<uint8_t> q(34 * 2 * 3);  // Q8_0 [64, 3]: 2 blocks of 34 bytes per row
  for (size_t k = 0; k < q.size(); ++k) q[k] = uint8_t(k * 7 + 1);
  const std::vector<float> norm = {1.f, 2.f, 3.f};

  for (uint32_t align : {32u, 64u, 256u}) {
    INFO("alignment " << align);
    gguf::Writer w;
    w.set_str("general.architecture", "llama");
    if (align != 32) w.set_u32("general.alignment", align);
    w.add_tensor("a", GgmlType::F32, {5, 3}, a.data());
    int calls = 0;
    w.set_chunk_bytes(34 * 2 + 1);  // one Q8_0 row per call
    w.add_tensor("q", GgmlType::Q8_0, {64, 3}, [&](int64_t r0, int64_t n, uint8_t* dst) {
      ++calls;
      CHECK(n == 1);
      std::memcpy(dst, q.data() + r0 * 68, size_t(n) * 68);
    });
    w.add_tensor("norm", GgmlType::F32, {3}, norm.data());
    const auto bytes = w.write_to_memory();
    CHECK(bytes.size() == w.file_size());
    CHECK(calls == 3);
    auto f = gguf::File::from_bytes(bytes, "mem");
    CHECK(f->alignment() == align);
    CHECK(f->data_offset() % align == 0);
    REQUIRE(f->tensors().size() == 3);
    for (auto& t : f->tensors()) CHECK(t.offset % align == 0);
    const auto* tq = f->tensor("q");
    REQUIRE(tq);
    CHECK(tq->type == GgmlType::Q8_0);
    CHECK(tq->nbytes == q.size());
    CHECK(std::memcmp(tq->data, q.data(), q.size()) == 0);
    CHECK(std::memcmp(f->tensor("a")->data, a.data(), a.size() * 4) == 0);
    CHECK(f->tensor("a")->ne[0] == 5);
    CHECK(f->tensor("a")->ne[1] == 3);
    CHECK(std::memcmp(f->tensor("norm")->data, norm.data(), 12) == 0);
  }
}

TEST_CASE("gguf writer: bad tensors and alignment are refused", "[gguf][writer]") {
  gguf::Writer w;
  std::vector<float> x(64);
  w.add_tensor("x", GgmlType::F32, {64}, x.data());
  auto msg = [&](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK_THAT(msg([&] { w.add_tensor("x", GgmlType::F32, {64}, x.data()); }), Catch::Contains("'x'") && Catch::Contains("twice"));
  CHECK_THAT(msg([&] { w.add_tensor("y", GgmlType::Q8_0, {48}, x.data()); }), Catch::Contains("'y'") && Catch::Contains("block size"));
  CHECK_THAT(msg([&] { w.add_tensor("y", GgmlType::F32, {1, 1, 1, 1, 1}, x.data()); }), Catch::Contains("dimensions"));
  CHECK_THAT(msg([&] { w.add_tensor("y", GgmlType::F32, {4, -1}, x.data()); }), Catch::Contains("negative"));
  CHECK_THAT(msg([&] { w.add_tensor("y", GgmlType(99), {4}, x.data()); }), Catch::Contains("unknown type"));
  CHECK_THAT(msg([&] { w.add_tensor("y", GgmlType::FQ3, {256}, x.data()); }),
             Catch::Contains("FQ3 is fish's own device layout"));
  CHECK_THAT(msg([&] { w.add_tensor("y", GgmlType::F32, {int64_t(1) << 40, int64_t(1) << 40}, x.data()); }),
             Catch::Contains("overflows"));
  CHECK(w.n_tensors() == 1);  // refused tensors were not kept
  w.set_u32("general.alignment", 3);
  CHECK_THAT(msg([&] { w.write_to_memory(); }), Catch::Contains("general.alignment"));
  w.set_str("general.alignment", "32");
  CHECK_THAT(msg([&] { w.write_to_memory(); }), Catch::Contains("general.alignment"));
  w.set_u32("general.alignment", 16);
  CHECK(gguf::File::from_bytes(w.write_to_memory(), "mem")->alignment() == 16);
}

TEST_CASE("gguf writer: write() goes through PATH.tmp and never leaves a half file", "[gguf][writer]") {
  const std::string dir = tmp_dir();
  const std::string path = dir + "/out.gguf";
  std::vector<float> x(256, 0.5f);

  gguf::Writer ok;
  ok.set_str("general.name", "ok");
  ok.add_tensor("x", GgmlType::F32, {256}, x.data());
  ok.write(path);
  CHECK(fs::exists(path));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK(fs::file_size(path) == ok.file_size());
  CHECK(read_all(path) == ok.write_to_memory());
  CHECK(*gguf::File::open(path)->get_str("general.name") == "ok");

  // A fill that fails half way: the exception comes out, the old file is intact
  // and no temporary is left.
  gguf::Writer bad;
  bad.set_str("general.name", "bad");
  bad.set_chunk_bytes(1024);
  bad.add_tensor("y", GgmlType::F32, {256, 64}, [](int64_t r0, int64_t, uint8_t* dst) {
    if (r0 >= 32) throw Error("fill failed on purpose");
    std::memset(dst, 0, 1024);
  });
  CHECK_THROWS_WITH(bad.write(path), Catch::Contains("on purpose"));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK(*gguf::File::open(path)->get_str("general.name") == "ok");

  // An unwritable destination names the file.
  CHECK_THROWS_WITH(ok.write(dir + "/no/such/dir/x.gguf"), Catch::Contains("no/such/dir/x.gguf.tmp"));
  fs::remove_all(dir);
}
