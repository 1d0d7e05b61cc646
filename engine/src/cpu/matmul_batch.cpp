#include "cpu/matmul_batch.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "cpu/matmul_kernels.h"
#include "cpu/thread_pool.h"

namespace fish {

namespace {

using mm::ActLayout;

// One weight of one item: its kernel, where its activations are, and the
// first work unit that covers its rows.
struct Part {
  mm::KernelFn fn;
  ActLayout layout;
  const uint8_t* w;
  uint64_t w_stride;
  int64_t n_in, n_out;
  const uint8_t* act;  // activation row 0 in `layout`
  uint64_t act_stride;
  int n_tok;
  float* y;
  uint64_t act_off;  // byte offset of its activations in the scratch buffer
  int64_t unit_rows;
  int64_t first_unit;
};

// Activations of one item in one layout: rows [0, n_tok) of x into dst.
struct QuantJob {
  ActLayout layout;
  const float* x;
  int64_t n_in;
  int n_tok;
  uint8_t* dst;
  uint64_t stride;
  int64_t first_row;  // index of its row 0 among all jobs' rows
};

void spin_until(const std::atomic<int64_t>& counter, int64_t target) {
  int spins = 0;
  while (counter.load(std::memory_order_acquire) < target) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (++spins > 4096) std::this_thread::yield();
  }
}

struct Scratch {
  std::vector<uint8_t> buf;
  uint8_t* get(size_t n) {
    if (buf.size() < n + 64) buf.resize(n + 64);
    const auto p = reinterpret_cast<uintptr_t>(buf.data());
    return buf.data() + ((64 - p % 64) % 64);
  }
};

}  // namespace

void matmul_batch(ThreadPool& pool, const MatmulItem* items, int n_items) {
  const mm::KernelFamily& fam = mm::active_kernel_family();
  std::vector<Part> parts;
  std::vector<QuantJob> quant;
  parts.reserve(size_t(n_items) * 2);
  // Activation bytes per (item, layout): offsets first, the buffer after.
  uint64_t total = 0;
  int64_t quant_rows = 0;
  for (int i = 0; i < n_items; ++i) {
    const MatmulItem& it = items[i];
    if (it.n_w < 1 || it.n_w > 2)
      throw Error("matmul_batch: item " + std::to_string(i) + " has " + std::to_string(it.n_w) + " weights (1 or 2)");
    if (it.n_tok <= 0) continue;
    if (!it.x) throw Error("matmul_batch: item " + std::to_string(i) + " has no input");
    ActLayout seen[2];
    uint64_t off[2] = {0, 0};
    int n_seen = 0;
    for (int j = 0; j < it.n_w; ++j) {
      const WeightView& w = it.w[j];
      const mm::KernelEntry e = mm::resolve_kernel(fam, w, "matmul_batch");
      if (w.n_in != it.w[0].n_in)
        throw Error("matmul_batch: item " + std::to_string(i) + ": weights of n_in " + std::to_string(it.w[0].n_in) +
                    " and " + std::to_string(w.n_in));
      if (w.n_out > 0 && !it.y[j]) throw Error("matmul_batch: item " + std::to_string(i) + " has a null output");
      int s = 0;
      while (s < n_seen && seen[s] != e.layout) ++s;
      if (s == n_seen) {
        seen[n_seen++] = e.layout;
        if (e.layout != ActLayout::F32) {
          const uint64_t stride = mm::act_row_bytes(e.layout, w.n_in);
          off[s] = total;
          quant.push_back(QuantJob{e.layout, it.x, w.n_in, it.n_tok, nullptr, stride, quant_rows});
          quant_rows += it.n_tok;
          total += stride * uint64_t(it.n_tok);
        }
      }
      Part p{};
      p.fn = e.fn;
      p.layout = e.layout;
      p.w = static_cast<const uint8_t*>(w.data);
      p.w_stride = w.row_bytes;
      p.n_in = w.n_in;
      p.n_out = w.n_out;
      p.n_tok = it.n_tok;
      p.y = it.y[j];
      if (e.layout == ActLayout::F32) {
        p.act = reinterpret_cast<const uint8_t*>(it.x);
        p.act_stride = uint64_t(w.n_in) * 4;
      } else {
        p.act = nullptr;  // filled once the buffer exists
        p.act_stride = mm::act_row_bytes(e.layout, w.n_in);
        p.act_off = off[s];
      }
      if (w.n_out > 0) parts.push_back(p);
    }
  }
  if (parts.empty()) return;
  static thread_local Scratch scratch;
  uint8_t* base = scratch.get(size_t(total));
  {  // the jobs' destinations, in the order their offsets were handed out
    uint64_t o = 0;
    for (QuantJob& q : quant) {
      q.dst = base + o;
      o += q.stride * uint64_t(q.n_tok);
    }
  }
  for (Part& p : parts)
    if (p.layout != ActLayout::F32) p.act = base + p.act_off;

  // Units as matmul's: about 8 per thread, at least 16 rows and 32 KiB of weights.
  constexpr uint64_t kUnitsPerThread = 8, kMinUnitBytes = 32u << 10;
  constexpr int64_t kRowGrain = 16;
  const int nth = pool.size();
  uint64_t cost = 0;
  for (const Part& p : parts) cost += uint64_t(p.n_out) * p.w_stride;
  uint64_t unit_bytes = cost / (uint64_t(nth) * kUnitsPerThread);
  if (unit_bytes < kMinUnitBytes) unit_bytes = kMinUnitBytes;
  int64_t n_units = 0;
  for (Part& p : parts) {
    int64_t rows = int64_t(unit_bytes / (p.w_stride ? p.w_stride : 1)) / kRowGrain * kRowGrain;
    if (rows < kRowGrain) rows = kRowGrain;
    p.unit_rows = rows;
    p.first_unit = n_units;
    n_units += (p.n_out + rows - 1) / rows;
  }

  auto quantize_row = [&](int64_t r) {  // row r among all quant jobs' rows
    size_t j = 0;
    while (j + 1 < quant.size() && quant[j + 1].first_row <= r) ++j;
    const QuantJob& q = quant[j];
    const int64_t t = r - q.first_row;
    const bool ggml = q.layout == ActLayout::Q8_0 || q.layout == ActLayout::Q8_1 || q.layout == ActLayout::Q8_K;
    uint8_t* dst = q.dst + uint64_t(t) * q.stride;
    if (ggml) mm::quantize_act_scalar(q.layout, q.x + t * q.n_in, q.n_in, dst);
    else fam.quantize(q.layout, q.x + t * q.n_in, q.n_in, dst);
  };
  size_t part_hint = 0;
  auto run_unit = [&](int64_t u, size_t& hint) {
    size_t i = hint < parts.size() && parts[hint].first_unit <= u ? hint : 0;
    while (i + 1 < parts.size() && parts[i + 1].first_unit <= u) ++i;
    hint = i;
    const Part& p = parts[i];
    mm::KernelArgs a;
    a.w = p.w;
    a.w_stride = p.w_stride;
    a.n_in = p.n_in;
    a.act = p.act;
    a.act_stride = p.act_stride;
    a.n_tok = p.n_tok;
    a.y = p.y;
    a.ldy = p.n_out;
    a.r0 = (u - p.first_unit) * p.unit_rows;
    a.r1 = a.r0 + p.unit_rows < p.n_out ? a.r0 + p.unit_rows : p.n_out;
    p.fn(a);
  };

  int64_t max_tok = 0;
  for (const Part& p : parts) max_tok = p.n_tok > max_tok ? p.n_tok : max_tok;
  const uint64_t work = cost * uint64_t(max_tok < 16 ? max_tok : 16);
  if (nth <= 1 || n_units <= 1 || work < (64u << 10)) {
    for (int64_t r = 0; r < quant_rows; ++r) quantize_row(r);
    for (int64_t u = 0; u < n_units; ++u) run_unit(u, part_hint);
    return;
  }
  std::atomic<int64_t> q_next{0}, q_done{0}, next{0};
  auto job = [&](int, int) {
    for (int64_t r; (r = q_next.fetch_add(1, std::memory_order_relaxed)) < quant_rows;) {
      quantize_row(r);
      q_done.fetch_add(1, std::memory_order_release);
    }
    spin_until(q_done, quant_rows);
    size_t hint = 0;
    for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < n_units;) run_unit(u, hint);
  };
  pool.run([j = &job](int ith, int n) { (*j)(ith, n); });
}

}  // namespace fish
