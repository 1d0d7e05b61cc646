// Online re-quantisation (FISH_GPU_REQUANT, common/requant_mode.h): the engine,
// not the plugin, makes the smaller device copy of a weight (FQ3 or Q4_K) and
// uploads it as a weight of that type to a backend whose supports() takes it.
// One implementation serves every plugin, the cache of converted bytes lives
// in one place (requant_cache.h), and the host's thread pool and quantisers
// are right here. A plugin that does not take FQ3 (an older one) keeps working:
// the modes that want FQ3 then leave Q4_K as it is and turn Q6_K / Q5_K into
// Q4_K where the plugin takes that.
//
// A conversion is dequant_row of the GGUF rows then requantize_row (quant.h),
// rows spread over the model's thread pool; the GGUF file and the CPU path are
// untouched.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "common/requant_mode.h"

namespace fish {

namespace gguf { class File; struct TensorInfo; }
class ThreadPool;
class RequantCache;

// The type mode m gives a matrix of type `from` (from itself: unchanged).
// output: the output projection, which is never made 3-bit.
GgmlType requant_target(RequantMode m, GgmlType from, bool output);

// requant_target for a backend: a target it does not take falls back to
// Q4_K (for a Q5_K / Q6_K source) or to the source type. Auto is not a mode
// here (choose one first, requant_auto.h).
GgmlType requant_device_type(RequantMode m, GgmlType from, bool output, const std::function<bool(GgmlType)>& supports);

// What was converted, by pair, in the spec's words: "134 x Q4_K->FQ3 1740 MB
// (from 2236), 21 x Q6_K->Q4_K 619 MB (from 903)" (MB = 10^6 bytes). An MoE
// layer's expert stack (n_expert matrices in one tensor, converted matrix by
// matrix) counts as one tensor, and the pair says how many of its tensors
// were stacks: "28 x Q4_K->FQ3 3.41 MB (from 4.37; 12 expert stacks, 96 experts)".
struct RequantMix {
  struct Entry {
    GgmlType from, to;
    int32_t count = 0;
    uint64_t bytes_from = 0, bytes_to = 0;
    int32_t stacks = 0;   // of count, expert stacks
    int64_t experts = 0;  // ... holding this many matrices
  };
  std::vector<Entry> entries;  // in the order first seen
  // n_mat > 0: an expert stack of n_mat matrices.
  void add(GgmlType from, GgmlType to, uint64_t bytes_from, uint64_t bytes_to, int64_t n_mat = 0);
  std::string str() const;
  int32_t count() const;
};

struct RequantStats {
  int32_t converted = 0;  // matrices converted at this load
  int32_t cached = 0;     // matrices read from the disk cache instead
  int32_t rejected = 0;   // cache entries found stale, truncated or corrupt (then converted and rewritten)
  int32_t refused = 0;    // matrices that could not be converted (non-finite weights): uploaded as they are
  int64_t weights_converted = 0;
  double convert_seconds = 0;  // wall time of the conversions
  double cache_seconds = 0;    // wall time of cache reads and writes
  int32_t threads = 1;
  // Wall time per converted weight (0 when nothing was converted).
  double ns_per_weight() const { return weights_converted ? convert_seconds * 1e9 / double(weights_converted) : 0.0; }
};

// Converts a matrix's rows: n_rows rows of n_in values of `from` at src
// (src_row_bytes apart) into `to` at dst (rows packed). Rows are spread over
// the pool in chunks taken from a shared counter (a thread the OS holds up
// delays one chunk, not a fixed share). Throws fish::Error (non-finite or
// out-of-range values, a type that cannot be converted) naming the row.
void requant_rows(ThreadPool& pool, GgmlType from, const uint8_t* src, uint64_t src_row_bytes, GgmlType to, uint8_t* dst,
                  int64_t n_in, int64_t n_rows);

class Requantizer {
 public:
  using Warn = std::function<void(const std::string&)>;
  // use_cache: read and write the disk cache (cache_root "": the user's cache folder).
  Requantizer(const gguf::File& file, ThreadPool& pool, bool use_cache, const std::string& cache_root, Warn warn,
              bool verbose);
  ~Requantizer();
  Requantizer(const Requantizer&) = delete;
  Requantizer& operator=(const Requantizer&) = delete;

  // The bytes of matrix t as type `to`, from the cache or converted now; null
  // (after a warning) when t cannot be converted. Valid until the next call.
  const std::vector<uint8_t>* convert(const gguf::TensorInfo& t, GgmlType to);

  const RequantStats& stats() const { return stats_; }
  // The cache folder ("" when the cache is off or unusable).
  std::string cache_dir() const;

 private:
  const gguf::File& file_;
  ThreadPool& pool_;
  Warn warn_;
  bool verbose_;
  std::unique_ptr<RequantCache> cache_;
  std::vector<uint8_t> buf_;
  RequantStats stats_;
};

}  // namespace fish
