// The row conversion (requant_rows) and the disk cache of converted bytes
// (model/requant_cache.h): the checksum catches every single-byte change, an
// entry reads back exactly, and a corrupted, truncated, stale or foreign entry
// is rejected; a folder that cannot be made or an entry that cannot be written
// only costs the cache.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/error.h"
#include "convert/scratch_dir.h"
#include "cpu/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/requant.h"
#include "model/requant_cache.h"
#include "quant/quant.h"
#include "test_paths.h"

using namespace fish;
namespace fs = std::filesystem;

namespace {

const std::string kModel = "synth-tiny-Q4_K_M.gguf";

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// Tensor t of the file converted to `to` one row at a time, on this thread.
std::vector<uint8_t> serial_convert(const gguf::TensorInfo& t, GgmlType to) {
  const uint64_t row = *ggml_row_bytes(uint32_t(to), t.ne[0]);
  std::vector<uint8_t> out(size_t(row * uint64_t(t.n_rows())));
  std::vector<float> x(static_cast<size_t>(t.ne[0]));
  for (int64_t r = 0; r < t.n_rows(); ++r) {
    dequant_row(t.type, t.data + uint64_t(r) * t.row_bytes(), x.data(), t.ne[0]);
    requantize_row(to, x.data(), out.data() + uint64_t(r) * row, t.ne[0]);
  }
  return out;
}

}  // namespace

TEST_CASE("checksum: every single-byte change and every length change is seen", "[requant][cache]") {
  std::vector<uint8_t> b(301);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 37 + 11);
  const uint64_t base = Checksum64::of(b.data(), b.size());
  // Fed in pieces of any size: the same value.
  for (size_t piece : {1u, 7u, 31u, 32u, 33u, 300u}) {
    Checksum64 c;
    for (size_t at = 0; at < b.size(); at += piece) c.update(b.data() + at, std::min(piece, b.size() - at));
    CHECK(c.digest() == base);
  }
  int same = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    for (uint8_t flip : {uint8_t(1), uint8_t(0x80), uint8_t(0xff)}) {
      b[i] ^= flip;
      same += Checksum64::of(b.data(), b.size()) == base;
      b[i] ^= flip;
    }
  }
  CHECK(same == 0);
  for (size_t n = 0; n < b.size(); ++n) same += Checksum64::of(b.data(), n) == base;
  CHECK(same == 0);
  std::vector<uint8_t> zeros(64, 0);
  CHECK(Checksum64::of(zeros.data(), 32) != Checksum64::of(zeros.data(), 64));  // zero padding is not free
}

TEST_CASE("requant_rows: the pool's result is the serial one, bit for bit, and bad rows are named", "[requant]") {
  auto file = gguf::File::open(test::model_path(kModel));
  ThreadPool pool(2);
  int converted = 0;
  for (const auto& t : file->tensors()) {
    if (t.n_dims != 2 || (t.type != GgmlType::Q4_K && t.type != GgmlType::Q6_K)) continue;
    const GgmlType to = t.type == GgmlType::Q4_K ? GgmlType::FQ3 : GgmlType::Q4_K;
    std::vector<uint8_t> got(size_t(*ggml_row_bytes(uint32_t(to), t.ne[0]) * uint64_t(t.n_rows())));
    requant_rows(pool, t.type, t.data, t.row_bytes(), to, got.data(), t.ne[0], t.n_rows());
    INFO(t.name);
    CHECK(got == serial_convert(t, to));
    ++converted;
  }
  CHECK(converted == 30);  // synth-tiny: 25 Q4_K + 5 Q6_K matrices
  // Q5_K sources (no shared model holds them): rows of a flat-topped
  // distribution (a sum of 4 uniforms) through Q5_K, then to Q4_K and FQ3;
  // the error against the Q5_K values within the spec's ranges for real
  // weights (Q4_K: below 7.3%, measured 6.56%; FQ3: below 14.6%, measured
  // 14.24%: flatter data than weights spreads over more of the 8 levels).
  {
    const int64_t n_in = 512, n_rows = 37;
    std::vector<float> g(size_t(n_in * n_rows));
    uint32_t st = 12345;
    for (auto& v : g) {  // a deterministic Gaussian-ish value: the sum of 4 uniforms, centred
      float sum = 0;
      for (int k = 0; k < 4; ++k) {
        st = st * 1664525u + 1013904223u;
        sum += float(st >> 8) / float(1 << 24);
      }
      v = (sum - 2.0f) * 1.7f;
    }
    const uint64_t rb = *ggml_row_bytes(uint32_t(GgmlType::Q5_K), n_in);
    std::vector<uint8_t> q5(size_t(rb * uint64_t(n_rows)));
    quantize_row(GgmlType::Q5_K, g.data(), q5.data(), n_in * n_rows);
    std::vector<float> src(g.size()), back(g.size());
    dequant_row(GgmlType::Q5_K, q5.data(), src.data(), n_in * n_rows);
    for (GgmlType to : {GgmlType::Q4_K, GgmlType::FQ3}) {
      std::vector<uint8_t> dst(size_t(*ggml_row_bytes(uint32_t(to), n_in) * uint64_t(n_rows)));
      requant_rows(pool, GgmlType::Q5_K, q5.data(), rb, to, dst.data(), n_in, n_rows);
      dequant_row(to, dst.data(), back.data(), n_in * n_rows);
      double num = 0, den = 0;
      for (size_t i = 0; i < src.size(); ++i) {
        num += double(src[i] - back[i]) * double(src[i] - back[i]);
        den += double(src[i]) * double(src[i]);
      }
      INFO(ggml_type_name(to) << " " << std::sqrt(num / den));
      CHECK(std::sqrt(num / den) < (to == GgmlType::Q4_K ? 0.073 : 0.146));
    }
  }
  // A row whose scale is NaN (a damaged file): an error naming the row, not a
  // block of garbage. Four Q4_K rows of 256 values; row 2's f16 d = 0x7fff.
  std::vector<uint8_t> src(4 * 144);
  const std::vector<float> half(256, 0.5f);
  for (int r = 0; r < 4; ++r) quantize_row(GgmlType::Q4_K, half.data(), src.data() + r * 144, 256);
  src[2 * 144 + 0] = 0xff;
  src[2 * 144 + 1] = 0x7f;
  std::vector<uint8_t> dst(4 * 112);
  CHECK_THROWS_WITH(requant_rows(pool, GgmlType::Q4_K, src.data(), 144, GgmlType::FQ3, dst.data(), 256, 4),
                    Catch::Contains("row 2") && Catch::Contains("not finite"));
  CHECK_THROWS_WITH(requant_rows(pool, GgmlType::Q4_K, src.data(), 144, GgmlType::Q6_K, dst.data(), 256, 4),
                    Catch::Contains("Q6_K"));
}

TEST_CASE("requant cache: hit, miss, and every kind of bad entry rejected", "[requant][cache]") {
  test::ScratchDir root("rq_cache");
  // A copy of the model, so its identity (inode, mtime) can be changed.
  const std::string model = root.file("m.gguf");
  fs::copy_file(test::model_path(kModel), model);
  auto file = gguf::File::open(model);
  const gguf::TensorInfo& t = *file->tensor("blk.0.attn_q.weight");
  const gguf::TensorInfo& t2 = *file->tensor("blk.1.attn_q.weight");
  REQUIRE(t.type == GgmlType::Q4_K);
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& m) { warnings.push_back(m); };
  RequantCache cache(*file, root.file("cache"), warn);
  REQUIRE(cache.enabled());
  CHECK(cache.dir().rfind(root.file("cache") + "/requant/m.gguf-", 0) == 0);

  std::vector<uint8_t> out, bytes = serial_convert(t, GgmlType::FQ3);
  std::string why;
  CHECK(cache.read(t, GgmlType::FQ3, out, &why) == RequantCache::Lookup::Miss);
  cache.write(t, GgmlType::FQ3, bytes.data(), bytes.size());
  cache.write(t2, GgmlType::FQ3, bytes.data(), bytes.size());  // another tensor: its own entry
  CHECK(warnings.empty());
  REQUIRE(cache.read(t, GgmlType::FQ3, out, &why) == RequantCache::Lookup::Hit);
  CHECK(out == bytes);
  CHECK(cache.read(t, GgmlType::Q4_K, out, &why) == RequantCache::Lookup::Miss);  // another conversion
  const std::string entry = cache.entry_path(t, GgmlType::FQ3);
  CHECK(entry == cache.dir() + "/blk.0.attn_q.weight.Q4_K-FQ3.rq");
  const std::vector<uint8_t> good = test::read_bytes(entry);
  REQUIRE(good.size() == 128 + bytes.size());

  struct Damage {
    const char* what;
    std::vector<uint8_t> (*make)(std::vector<uint8_t>);
    const char* reason;
  };
  const Damage damages[] = {
      {"a payload byte", [](std::vector<uint8_t> b) { b[b.size() / 2] ^= 0x10; return b; }, "payload checksum"},
      {"the last byte", [](std::vector<uint8_t> b) { b.back() ^= 1; return b; }, "payload checksum"},
      {"a header byte", [](std::vector<uint8_t> b) { b[40] ^= 1; return b; }, "header checksum"},
      {"truncated payload", [](std::vector<uint8_t> b) { b.resize(b.size() - 100); return b; }, "size"},
      {"truncated header", [](std::vector<uint8_t> b) { b.resize(60); return b; }, "truncated header"},
      {"empty", [](std::vector<uint8_t>) { return std::vector<uint8_t>(); }, "truncated header"},
      {"a byte appended", [](std::vector<uint8_t> b) { b.push_back(0); return b; }, "size"},
  };
  for (const Damage& d : damages) {
    INFO(d.what);
    write_bytes(entry, d.make(good));
    why.clear();
    CHECK(cache.read(t, GgmlType::FQ3, out, &why) == RequantCache::Lookup::Rejected);
    CHECK_THAT(why, Catch::Contains(d.reason));
  }
  // Another tensor's entry under this name (same size: the header says whose it is).
  fs::copy_file(cache.entry_path(t2, GgmlType::FQ3), entry, fs::copy_options::overwrite_existing);
  CHECK(cache.read(t, GgmlType::FQ3, out, &why) == RequantCache::Lookup::Rejected);
  CHECK_THAT(why, Catch::Contains("another file or tensor"));
  // Rewritten: used again.
  cache.write(t, GgmlType::FQ3, bytes.data(), bytes.size());
  CHECK(cache.read(t, GgmlType::FQ3, out, &why) == RequantCache::Lookup::Hit);
  CHECK(out == bytes);
  CHECK(warnings.empty());

  // The model file changed (new mtime): a new folder; the old one is removed.
  const std::string old_dir = cache.dir();
  file.reset();
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0, std::ios::end);
    f.write("\0", 1);  // one byte more: size and mtime change
  }
  auto file2 = gguf::File::open(model);
  RequantCache cache2(*file2, root.file("cache"), warn);
  CHECK(cache2.dir() != old_dir);
  CHECK_FALSE(fs::exists(old_dir));
  CHECK(cache2.read(*file2->tensor("blk.0.attn_q.weight"), GgmlType::FQ3, out, &why) == RequantCache::Lookup::Miss);
  CHECK(warnings.empty());
}

TEST_CASE("requant cache: an unusable folder or a failed write only costs the cache", "[requant][cache]") {
  test::ScratchDir root("rq_cache_bad");
  auto file = gguf::File::open(test::model_path(kModel));
  const gguf::TensorInfo& t = *file->tensor("blk.0.attn_q.weight");
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& m) { warnings.push_back(m); };
  // The cache root is a file: no folder can be made under it.
  write_bytes(root.file("blocked"), {1, 2, 3});
  RequantCache blocked(*file, root.file("blocked"), warn);
  CHECK_FALSE(blocked.enabled());
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("cannot create the folder") && Catch::Contains("not caching"));
  std::vector<uint8_t> out;
  CHECK(blocked.read(t, GgmlType::FQ3, out, nullptr) == RequantCache::Lookup::Miss);

  // An entry's name taken by a folder: the write fails (one warning), later
  // writes are not tried, reads still work and the folder is not mistaken for an entry.
  warnings.clear();
  RequantCache cache(*file, root.file("cache"), warn);
  REQUIRE(cache.enabled());
  fs::create_directories(cache.entry_path(t, GgmlType::FQ3) + "/x");
  const std::vector<uint8_t> bytes = serial_convert(t, GgmlType::FQ3);
  cache.write(t, GgmlType::FQ3, bytes.data(), bytes.size());
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("this load caches nothing more"));
  const gguf::TensorInfo& t2 = *file->tensor("blk.1.attn_q.weight");
  cache.write(t2, GgmlType::FQ3, bytes.data(), bytes.size());
  CHECK(warnings.size() == 1);
  CHECK_FALSE(fs::exists(cache.entry_path(t2, GgmlType::FQ3)));
  std::string why;
  CHECK(cache.read(t, GgmlType::FQ3, out, &why) == RequantCache::Lookup::Rejected);
  CHECK_THAT(why, Catch::Contains("not a regular file"));
  // No temporary files left behind.
  int tmp = 0;
  for (const auto& e : fs::directory_iterator(cache.dir())) tmp += e.path().string().find(".tmp") != std::string::npos;
  CHECK(tmp == 0);
}

TEST_CASE("requant cache: the user's cache folder", "[requant][cache]") {
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string keep_xdg = old_xdg ? old_xdg : "";
  setenv("XDG_CACHE_HOME", "/some/where", 1);
  CHECK(RequantCache::default_root() == "/some/where/fish");
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);  // the XDG rules: relative is invalid
  const char* home = std::getenv("HOME");
  if (home && *home) CHECK(RequantCache::default_root() == std::string(home) + "/.cache/fish");
  if (old_xdg) setenv("XDG_CACHE_HOME", keep_xdg.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
  // The fingerprint is one value per build of the quantisers (computed once).
  CHECK(requant_fingerprint() == requant_fingerprint());
  CHECK(requant_fingerprint() != 0);
}
