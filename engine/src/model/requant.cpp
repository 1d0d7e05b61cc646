// Online re-quantisation: the rules of the modes, the row conversion on the
// thread pool, and the converter that goes through the disk cache (see requant.h).
#include "model/requant.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "common/error.h"
#include "cpu/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/requant_cache.h"
#include "quant/quant.h"

namespace fish {

namespace {

bool k_quant_source(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GgmlType requant_target(RequantMode m, GgmlType from, bool output) {
  if (!k_quant_source(from) || m == RequantMode::Off || m == RequantMode::Auto) return from;
  const bool wide = from == GgmlType::Q5_K || from == GgmlType::Q6_K;
  if (output) return wide ? GgmlType::Q4_K : from;
  switch (m) {
    case RequantMode::AllFq3: return GgmlType::FQ3;
    case RequantMode::ToQ4K: return wide ? GgmlType::Q4_K : from;
    case RequantMode::Mixed: return wide ? GgmlType::Q4_K : GgmlType::FQ3;
    default: return from;
  }
}

GgmlType requant_device_type(RequantMode m, GgmlType from, bool output, const std::function<bool(GgmlType)>& supports) {
  const GgmlType to = requant_target(m, from, output);
  if (to == from || supports(to)) return to;
  if (to == GgmlType::FQ3 && from != GgmlType::Q4_K && supports(GgmlType::Q4_K)) return GgmlType::Q4_K;
  return from;
}

void RequantMix::add(GgmlType from, GgmlType to, uint64_t bytes_from, uint64_t bytes_to, int64_t n_mat) {
  auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.from == from && e.to == to; });
  if (it == entries.end()) it = entries.insert(entries.end(), Entry{from, to});
  ++it->count;
  it->bytes_from += bytes_from;
  it->bytes_to += bytes_to;
  if (n_mat > 0) {
    ++it->stacks;
    it->experts += n_mat;
  }
}

std::string RequantMix::str() const {
  // Whole MB as the spec writes them; small models get the digits that
  // still say something.
  auto mb = [](uint64_t bytes) {
    const double v = double(bytes) / 1e6;
    char b[32];
    std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : v >= 1 ? "%.1f" : "%.2f", v);
    return std::string(b);
  };
  std::string s;
  for (const Entry& e : entries) {
    const std::string stacks = e.stacks ? "; " + std::to_string(e.stacks) + " expert stack" +
                                              (e.stacks == 1 ? "" : "s") + ", " + std::to_string(e.experts) +
                                              " expert" + (e.experts == 1 ? "" : "s")
                                        : "";
    s += (s.empty() ? "" : ", ") + std::to_string(e.count) + " x " + ggml_type_name(e.from) + "->" +
         ggml_type_name(e.to) + " " + mb(e.bytes_to) + " MB (from " + mb(e.bytes_from) + stacks + ")";
  }
  return s;
}

int32_t RequantMix::count() const {
  int32_t n = 0;
  for (const Entry& e : entries) n += e.count;
  return n;
}

void requant_rows(ThreadPool& pool, GgmlType from, const uint8_t* src, uint64_t src_row_bytes, GgmlType to, uint8_t* dst,
                  int64_t n_in, int64_t n_rows) {
  const DequantRowFn dequant = dequant_row_fn(from);
  requantize_row_fn(to);  // throws for a type there is no re-quantiser for
  const auto dst_row = ggml_row_bytes(uint32_t(to), n_in);
  if (!dst_row || n_in <= 0 || !ggml_row_bytes(uint32_t(from), n_in))
    throw Error("re-quantising " + ggml_type_name(from) + " to " + ggml_type_name(to) + ": rows of " +
                std::to_string(n_in) + " values are not whole blocks of both");
  // Chunks of ~64k values: large enough that taking one costs nothing, small
  // enough (a few ms) that the threads finish together.
  const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 16) / n_in);
  const int64_t n_chunks = (n_rows + chunk - 1) / chunk;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string error;
  pool.run([&](int, int) {
    std::vector<float> row(static_cast<size_t>(n_in));
    while (!failed.load(std::memory_order_relaxed)) {
      const int64_t c = next.fetch_add(1);
      if (c >= n_chunks) return;
      const int64_t r1 = std::min(n_rows, (c + 1) * chunk);
      for (int64_t r = c * chunk; r < r1; ++r) {
        dequant(src + uint64_t(r) * src_row_bytes, row.data(), n_in);
        try {
          requantize_row(to, row.data(), dst + uint64_t(r) * *dst_row, n_in);
        } catch (const Error& e) {
          std::lock_guard<std::mutex> lk(mu);
          if (!failed.exchange(true)) error = "row " + std::to_string(r) + ": " + e.what();
          return;
        }
      }
    }
  });
  if (failed.load()) throw Error(error);
}

Requantizer::Requantizer(const gguf::File& file, ThreadPool& pool, bool use_cache, const std::string& cache_root,
                         Warn warn, bool verbose)
    : file_(file), pool_(pool), warn_(std::move(warn)), verbose_(verbose) {
  stats_.threads = pool.size();
  if (use_cache) {
    cache_ = std::make_unique<RequantCache>(file, cache_root, warn_);
    if (!cache_->enabled()) cache_.reset();
  }
}

Requantizer::~Requantizer() = default;

std::string Requantizer::cache_dir() const { return cache_ ? cache_->dir() : std::string(); }

const std::vector<uint8_t>* Requantizer::convert(const gguf::TensorInfo& t, GgmlType to) {
  const int64_t n_in = t.ne[0], n_rows = t.n_rows();
  const auto row = ggml_row_bytes(uint32_t(to), n_in);
  const std::string what = file_.path() + ": tensor '" + t.name + "' (" + ggml_type_name(t.type) + " -> " +
                           ggml_type_name(to) + ")";
  if (!row || n_rows <= 0) {
    if (warn_) warn_(what + ": rows of " + std::to_string(n_in) + " values cannot be re-quantised; uploaded as it is");
    ++stats_.refused;
    return nullptr;
  }
  if (cache_) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string why;
    const RequantCache::Lookup r = cache_->read(t, to, buf_, &why);
    stats_.cache_seconds += seconds_since(t0);
    if (r == RequantCache::Lookup::Hit) {
      ++stats_.cached;
      return &buf_;
    }
    if (r == RequantCache::Lookup::Rejected) {
      ++stats_.rejected;
      if (verbose_) std::fprintf(stderr, "fish: re-quantisation cache entry rejected (rebuilt): %s\n", why.c_str());
    }
  }
  buf_.resize(size_t(*row * uint64_t(n_rows)));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    requant_rows(pool_, t.type, t.data, t.row_bytes(), to, buf_.data(), n_in, n_rows);
  } catch (const Error& e) {
    if (warn_) warn_(what + ": " + e.what() + "; uploaded as it is");
    ++stats_.refused;
    return nullptr;
  }
  stats_.convert_seconds += seconds_since(t0);
  stats_.weights_converted += n_in * n_rows;
  ++stats_.converted;
  if (cache_) {
    const auto t1 = std::chrono::steady_clock::now();
    cache_->write(t, to, buf_.data(), buf_.size());
    stats_.cache_seconds += seconds_since(t1);
  }
  return &buf_;
}

}  // namespace fish
