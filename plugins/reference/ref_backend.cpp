#include "ref_backend.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "host.h"
#include "ref_span.h"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace fish::reference {

uint64_t host_memory_available() {
#if defined(_SC_AVPHYS_PAGES)
  const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0) return uint64_t(pages) * uint64_t(size);
#endif
  return 0;
}

uint64_t host_memory_total() {
#if defined(_SC_PHYS_PAGES)
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0) return uint64_t(pages) * uint64_t(size);
#endif
  return 0;
}

Backend::Backend(const fish_backend_config* cfg) {
  // A config from an older host may be shorter: fields past its struct_size are 0.
  if (cfg && FISH_STRUCT_HAS(cfg, fish_backend_config, device_index) && cfg->device_index > 0)
    fail(FISH_E_NO_DEVICE, "device " + std::to_string(cfg->device_index) + " does not exist (the reference plugin has one)");
  if (cfg && FISH_STRUCT_HAS(cfg, fish_backend_config, memory_budget)) budget_ = cfg->memory_budget;
#ifdef FISH_REFERENCE_DEFAULT_BUDGET
  // Test builds only (tests/plugin): a small device, to see the engine place what fits.
  if (!budget_) budget_ = FISH_REFERENCE_DEFAULT_BUDGET;
#endif
}

Backend::~Backend() {
  for (Span* s : spans_) delete s;
  for (Weight* w : weights_) delete w;
}

void Backend::open() {
  // Nothing to open on the host; a real plugin creates its device here (lazily).
  if (!opened_) log(FISH_LOG_DEBUG, "backend opened" + std::string(budget_ ? " with a budget of " + std::to_string(budget_) + " bytes" : ""));
  opened_ = true;
}

std::string Backend::describe(uint32_t what) {
  switch (what) {
    case FISH_DESCRIBE_SUMMARY: {
      std::map<std::string, int> by_type;
      uint64_t wbytes = 0;
      for (const Weight* w : weights_) {
        ++by_type[type_name(w->type)];
        wbytes += w->data.size();
      }
      std::string s = "reference CPU: " + std::to_string(wbytes / 1000000) + " MB weights";
      for (const auto& [t, n] : by_type) s += ", " + std::to_string(n) + " x " + t;
      if (!spans_.empty()) {
        int layers = 0;
        for (const Span* sp : spans_) layers += sp->n_layers();
        s += "; " + std::to_string(spans_.size()) + " span(s), " + std::to_string(layers) + " layers, KV f32";
      }
      return s;
    }
    case FISH_DESCRIBE_STATUS:
      return opened_ ? "open: CPU reference (f32 math, " + std::to_string(host()->n_threads()) + " host threads)"
                     : "not opened";
    case FISH_DESCRIBE_PROFILE:
      return "";  // the reference plugin keeps no timings
    default:
      fail(FISH_E_UNSUPPORTED, "describe: unknown selector " + std::to_string(what));
  }
}

uint64_t Backend::memory_free() const {
  const uint64_t host_free = host_memory_available();
  if (!budget_) return host_free;
  const uint64_t left = budget_ > resident_ ? budget_ - resident_ : 0;
  return host_free ? std::min(left, host_free) : left;
}

bool Backend::supports(uint32_t type) const {
#ifdef FISH_REFERENCE_NO_FQ3
  // Test build (tests/plugin refnofq3): a plugin from before ABI 2.1, which
  // knows nothing of fish's own layouts.
  if (type >= FISH_TYPE_FQ3) return false;
#endif
  // Every type the host decodes, fish's own (FQ3, ABI 2.1) included: the
  // products go through the host's dequant_row.
  fish_type_info ti{};
  ti.struct_size = sizeof ti;
  return host()->type_info(type, &ti) == FISH_OK && ti.can_dequant;
}

void Backend::charge(uint64_t bytes, const std::string& what) {
  if (budget_ && (bytes > budget_ || resident_ > budget_ - bytes))
    fail(FISH_E_OUT_OF_MEMORY, what + ": " + std::to_string(bytes) + " bytes exceed the budget (" +
                                   std::to_string(budget_ - std::min(budget_, resident_)) + " of " +
                                   std::to_string(budget_) + " bytes left)");
  resident_ += bytes;
}

Weight* Backend::upload(const fish_weight_desc* d) {
  if (!d || !FISH_STRUCT_HAS(d, fish_weight_desc, nbytes))
    fail(FISH_E_INVALID_ARGUMENT, "upload: the weight description is missing or too short");
  const std::string name = d->name ? d->name : "(unnamed)";
  if (!supports(d->type)) fail(FISH_E_UNSUPPORTED, "upload " + name + ": type " + type_name(d->type) + " is not supported");
  if (d->n_in <= 0 || d->n_out <= 0 || !d->data)
    fail(FISH_E_INVALID_ARGUMENT, "upload " + name + ": bad shape [" + std::to_string(d->n_out) + " x " +
                                      std::to_string(d->n_in) + "] or no data");
  const int64_t n_mat = d->n_mat == 0 ? 1 : d->n_mat;  // 0 is read as 1 (a single matrix)
  if (n_mat < 0) fail(FISH_E_INVALID_ARGUMENT, "upload " + name + ": n_mat " + std::to_string(n_mat) + " is negative");
  const uint64_t rb = row_bytes(d->type, d->n_in);
  const uint64_t rows = uint64_t(d->n_out) * uint64_t(n_mat);
  if (rows / uint64_t(n_mat) != uint64_t(d->n_out) || rows > UINT64_MAX / rb || rb * rows != d->nbytes)
    fail(FISH_E_INVALID_ARGUMENT, "upload " + name + ": nbytes " + std::to_string(d->nbytes) + " does not match " +
                                      std::to_string(n_mat) + " x " + std::to_string(d->n_out) + " rows of " +
                                      std::to_string(rb) + " bytes");
  charge(d->nbytes, "upload " + name);
  auto* w = new (std::nothrow) Weight();
  if (!w) {
    uncharge(d->nbytes);
    fail(FISH_E_OUT_OF_MEMORY, "upload " + name + ": out of host memory");
  }
  try {
    w->name = name;
    w->type = d->type;
    w->n_in = d->n_in;
    w->n_out = d->n_out;
    w->n_mat = n_mat;
    w->row_bytes = rb;
    w->data.assign(static_cast<const uint8_t*>(d->data), static_cast<const uint8_t*>(d->data) + d->nbytes);
  } catch (...) {
    delete w;
    uncharge(d->nbytes);
    throw;
  }
  weights_.insert(w);
  return w;
}

void Backend::release(Weight* w) {
  for (const Span* s : spans_)
    if (s->uses(w)) fail(FISH_E_INVALID_ARGUMENT, "release " + w->name + ": a span still uses it (destroy the span first)");
  weights_.erase(w);
  uncharge(w->data.size());
  delete w;
}

Weight* Backend::weight(fish_weight* h) const {
  auto* w = reinterpret_cast<Weight*>(h);
  if (!h || !weights_.count(w)) fail(FISH_E_INVALID_ARGUMENT, "not a weight of this backend");
  return w;
}

Span* Backend::span(fish_span* h) const {
  auto* s = reinterpret_cast<Span*>(h);
  if (!h || !spans_.count(s)) fail(FISH_E_INVALID_ARGUMENT, "not a span of this backend");
  return s;
}

void Backend::matmul(const Weight& w, const float* x, int n_tok, float* y, int64_t mat, bool allow_stack) const {
  if (!x || !y || n_tok < 1) fail(FISH_E_INVALID_ARGUMENT, "matmul " + w.name + ": n_tok must be >= 1 with x and y given");
  if (mat < 0 || mat >= w.n_mat)
    fail(FISH_E_INVALID_ARGUMENT, "matmul " + w.name + ": matrix " + std::to_string(mat) + " of " + std::to_string(w.n_mat));
  if (w.n_mat != 1 && !allow_stack)
    fail(FISH_E_INVALID_ARGUMENT, "matmul " + w.name + ": a stack of " + std::to_string(w.n_mat) +
                                      " matrices (matmul takes single matrices)");
  const int64_t n_in = w.n_in, n_out = w.n_out;
  // Rows are split over the host's threads; each range decodes one row at a
  // time into its own scratch and dots it with every token.
  parallel_for(n_out, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = r0; r < r1; ++r) {
      const uint64_t at = (uint64_t(mat) * uint64_t(n_out) + uint64_t(r)) * w.row_bytes;  // row r of matrix mat
      const fish_status st = host()->dequant_row(w.type, w.data.data() + at, row.data(), n_in);
      if (st != FISH_OK) fail(st, "matmul " + w.name + ": the host could not decode row " + std::to_string(r));
      for (int t = 0; t < n_tok; ++t) {
        const float* xt = x + int64_t(t) * n_in;
        double acc = 0.0;
        for (int64_t i = 0; i < n_in; ++i) acc += double(row[size_t(i)]) * double(xt[i]);
        y[int64_t(t) * n_out + r] = float(acc);
      }
    }
  });
}

}  // namespace fish::reference
