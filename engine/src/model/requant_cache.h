// The disk cache of online re-quantisation: the bytes of a re-quantised
// device copy, kept so that the next load of the same model costs a read
// instead of the conversion (an 8B model: ~10 s of 16 threads).
//
// Where: $XDG_CACHE_HOME/fish/requant (else ~/.cache/fish/requant), one folder
// per model file named by a hash of its path and one by a hash of its identity
// as the loader's descriptor saw it (device, inode, size, mtime in ns):
// "<path hash>-<identity hash>". A file changed in place gets a new folder;
// the old folders of the same path are removed when the new one is made.
// One entry per tensor and conversion: "<tensor>.<FROM>-<TO>.rq".
//
// An entry is a 128-byte header, then the bytes. The header repeats the whole
// key (layout version, the quantisers' fingerprint, the file identity, the
// tensor's name hash, offset, size, shape and both types), the payload's size
// and checksum, and its own checksum. An entry is used only when every field
// matches and both checksums agree; otherwise (stale: another fish wrote it;
// truncated; a byte changed) it is counted as rejected, the caller converts,
// and the entry is written anew. Entries are written to a temporary name and
// renamed, so a crash or a full disk never leaves a half entry under the real
// name. Any failure to write (a full disk, a read-only or unwritable folder)
// costs only the cache: one warning, and this load writes no further entries.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/ggml_type.h"

namespace fish {

namespace gguf { class File; struct TensorInfo; }

class RequantCache {
 public:
  using Warn = std::function<void(const std::string&)>;

  // The cache folder of `file` under `root` ("": the user's cache folder as
  // above). A folder that cannot be made disables the cache (one warning).
  RequantCache(const gguf::File& file, const std::string& root, Warn warn);

  bool enabled() const { return enabled_; }
  const std::string& dir() const { return dir_; }

  enum class Lookup { Hit, Miss, Rejected };
  // Reads the entry of tensor t converted to `to` into out. Rejected: why says
  // what was wrong (for verbose output).
  Lookup read(const gguf::TensorInfo& t, GgmlType to, std::vector<uint8_t>& out, std::string* why);
  // Stores the converted bytes; on failure warns (once) and disables writing.
  void write(const gguf::TensorInfo& t, GgmlType to, const uint8_t* data, uint64_t n);

  // The entry's file path (tests corrupt entries through it).
  std::string entry_path(const gguf::TensorInfo& t, GgmlType to) const;

  // The user's cache folder for fish: $XDG_CACHE_HOME/fish or ~/.cache/fish
  // ("" when neither variable is set).
  static std::string default_root();

  // Bumped whenever the bytes a conversion writes change for the same input
  // (requantize_row's search, FQ3's layout). The quantisers' fingerprint in
  // every header also catches a change nobody bumped this for.
  static constexpr uint32_t kLayoutVersion = 1;

 private:
  void disable_writes(const std::string& why);

  const gguf::File& file_;
  Warn warn_;
  std::string dir_;
  bool enabled_ = false;
  bool writable_ = false;
};

// A 64-bit value that changes when requantize_row's output changes: both
// re-quantisers on a fixed pseudo-random input, checksummed (computed once).
uint64_t requant_fingerprint();

}  // namespace fish
