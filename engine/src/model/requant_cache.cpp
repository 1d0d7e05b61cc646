// The re-quantisation cache (see requant_cache.h for the layout and rules).
#include "model/requant_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "common/checksum.h"
#include "gguf/gguf_file.h"
#include "quant/quant.h"

namespace fish {

namespace fs = std::filesystem;

namespace {

// Little-endian on disk as in memory (fish runs on little-endian hosts only,
// as its GGUF reader does). Every field is fixed-size; 128 bytes in all.
struct Header {
  char magic[8];
  uint32_t layout_version;
  uint32_t from_type, to_type;
  uint32_t reserved;
  uint64_t fingerprint;
  uint64_t device, inode, file_size, mtime_ns;
  uint64_t name_hash;
  uint64_t tensor_offset, tensor_nbytes;
  int64_t n_in, n_rows;
  uint64_t payload_bytes, payload_checksum;
  uint64_t header_checksum;  // of every byte before this field
};
static_assert(sizeof(Header) == 128, "the cache header is 128 bytes");

constexpr char kMagic[8] = {'F', 'I', 'S', 'H', 'R', 'Q', 'C', '1'};

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// Letters, digits, '.', '_' and '-' kept, anything else '_', at most 80 characters.
std::string file_name_part(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    out += ok ? c : '_';
    if (out.size() == 80) break;
  }
  return out.empty() ? std::string("_") : out;
}

uint64_t header_checksum(const void* h) { return Checksum64::of(h, offsetof(Header, header_checksum)); }

// Reads exactly n bytes (false on a short file or an error).
bool read_exact(int fd, void* dst, uint64_t n) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, size_t(std::min<uint64_t>(n, uint64_t(1) << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= uint64_t(r);
  }
  return true;
}

bool write_all(int fd, const void* src, uint64_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, size_t(std::min<uint64_t>(n, uint64_t(1) << 30)));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= uint64_t(w);
  }
  return true;
}

}  // namespace

namespace {

// The header an entry of tensor t of `file` converted to `to` must have (checksums left 0).
Header header_for(const gguf::File& file, const gguf::TensorInfo& t, GgmlType to, uint64_t payload) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.layout_version = RequantCache::kLayoutVersion;
  h.from_type = uint32_t(t.type);
  h.to_type = uint32_t(to);
  h.fingerprint = requant_fingerprint();
  const gguf::FileIdentity& id = file.identity();
  h.device = id.device;
  h.inode = id.inode;
  h.file_size = id.size;
  h.mtime_ns = id.mtime_ns;
  h.name_hash = Checksum64::of(t.name.data(), t.name.size());
  h.tensor_offset = t.offset;
  h.tensor_nbytes = t.nbytes;
  h.n_in = t.ne[0];
  h.n_rows = t.n_rows();
  h.payload_bytes = payload;
  return h;
}

}  // namespace

uint64_t requant_fingerprint() {
  static const uint64_t fp = [] {
    std::mt19937 rng(20261202);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(2 * 256);
    for (auto& v : x) v = nd(rng);
    x[3] = 0.0f;  // a few special values the fit treats apart
    for (int i = 256 + 32; i < 256 + 64; ++i) x[size_t(i)] = -0.125f;
    Checksum64 c(RequantCache::kLayoutVersion);
    for (GgmlType t : {GgmlType::FQ3, GgmlType::Q4_K}) {
      std::vector<uint8_t> q(size_t(*ggml_row_bytes(uint32_t(t), 512)));
      requantize_row(t, x.data(), q.data(), 512);
      c.update(q.data(), q.size());
    }
    return c.digest();
  }();
  return fp;
}

std::string RequantCache::default_root() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  // The XDG base directory rules: a relative XDG_CACHE_HOME is invalid and ignored.
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/fish";
  const char* home = std::getenv("HOME");
  if (home && home[0]) return std::string(home) + "/.cache/fish";
  return "";
}

RequantCache::RequantCache(const gguf::File& file, const std::string& root_in, Warn warn)
    : file_(file), warn_(std::move(warn)) {
  const std::string root = root_in.empty() ? default_root() : root_in;
  if (root.empty()) {
    if (warn_) warn_("re-quantisation cache: neither XDG_CACHE_HOME nor HOME is set; not caching");
    return;
  }
  const gguf::FileIdentity& id = file.identity();
  if (id.inode == 0 && id.size == 0) return;  // an in-memory image: nothing to key it by
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(file.path(), ec), ec);
  if (ec) abs = file.path();
  const std::string path_key = file_name_part(fs::path(file.path()).filename().string()) + "-" +
                               hex16(Checksum64::of(abs.string().data(), abs.string().size())) + "-";
  const uint64_t id_words[4] = {id.device, id.inode, id.size, id.mtime_ns};
  const fs::path base = fs::path(root) / "requant";
  dir_ = (base / (path_key + hex16(Checksum64::of(id_words, sizeof id_words)))).string();
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) {
    if (warn_) warn_("re-quantisation cache " + dir_ + ": cannot create the folder (" + ec.message() + "); not caching");
    dir_.clear();
    return;
  }
  enabled_ = writable_ = true;
  // Folders of earlier versions of the same file (same path, other identity)
  // can never be used again.
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(path_key, 0) == 0 && it->path() != fs::path(dir_)) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
    }
  }
}

std::string RequantCache::entry_path(const gguf::TensorInfo& t, GgmlType to) const {
  return dir_ + "/" + file_name_part(t.name) + "." + ggml_type_name(t.type) + "-" + ggml_type_name(to) + ".rq";
}

RequantCache::Lookup RequantCache::read(const gguf::TensorInfo& t, GgmlType to, std::vector<uint8_t>& out,
                                        std::string* why) {
  if (!enabled_) return Lookup::Miss;
  const auto row = ggml_row_bytes(uint32_t(to), t.ne[0]);
  if (!row) return Lookup::Miss;
  const uint64_t payload = *row * uint64_t(t.n_rows());
  const std::string path = entry_path(t, to);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Lookup::Miss;
  auto reject = [&](const std::string& what) {
    ::close(fd);
    if (why) *why = path + ": " + what;
    return Lookup::Rejected;
  };
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return reject("not a regular file");
  Header got{};
  if (!read_exact(fd, &got, sizeof got)) return reject("truncated header");
  if (header_checksum(&got) != got.header_checksum) return reject("header checksum mismatch");
  Header want = header_for(file_, t, to, payload);
  want.payload_checksum = got.payload_checksum;
  want.header_checksum = header_checksum(&want);
  if (std::memcmp(&got, &want, sizeof got) != 0)
    return reject(got.layout_version != kLayoutVersion || got.fingerprint != want.fingerprint
                      ? "written by another version of fish's re-quantisation"
                      : "made from another file or tensor");
  if (uint64_t(st.st_size) != sizeof(Header) + payload)
    return reject("size " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(sizeof(Header) + payload));
  out.resize(size_t(payload));
  if (!read_exact(fd, out.data(), payload)) return reject("truncated payload");
  if (Checksum64::of(out.data(), out.size()) != got.payload_checksum) return reject("payload checksum mismatch");
  ::close(fd);
  return Lookup::Hit;
}

void RequantCache::disable_writes(const std::string& why) {
  if (!writable_) return;
  writable_ = false;
  if (warn_) warn_("re-quantisation cache " + dir_ + ": " + why + "; this load caches nothing more");
}

void RequantCache::write(const gguf::TensorInfo& t, GgmlType to, const uint8_t* data, uint64_t n) {
  if (!enabled_ || !writable_) return;
  Header h = header_for(file_, t, to, n);
  h.payload_checksum = Checksum64::of(data, size_t(n));
  h.header_checksum = header_checksum(&h);
  const std::string path = entry_path(t, to);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    disable_writes(std::string("cannot write ") + tmp + ": " + std::strerror(errno));
    return;
  }
  const bool ok = write_all(fd, &h, sizeof h) && write_all(fd, data, n);
  const int err = errno;
  const bool closed = ::close(fd) == 0;
  if (!ok || !closed) {
    ::unlink(tmp.c_str());
    disable_writes("writing " + tmp + " failed: " + std::strerror(ok ? errno : err));
    return;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    disable_writes("cannot rename " + tmp + ": " + std::strerror(e));
  }
}

}  // namespace fish
