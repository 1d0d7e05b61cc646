// The matmul driver: checks the weights, picks the kernel family (cpuid, or
// the process configuration's FISH_CPU_KERNELS), quantises the activations
// once per call into a reusable per-thread buffer (in parallel when there are
// many tokens), and hands the output rows of one or several weights to the
// thread pool in one ThreadPool::run, as units of about equal weight bytes
// that the threads take from a shared counter.
#include "cpu/matmul.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/engine_config.h"
#include "common/error.h"
#include "cpu/cpu_features.h"
#include "cpu/matmul_kernels.h"
#include "cpu/thread_pool.h"
#include "quant/quant.h"

namespace fish {

using mm::ActLayout;
using mm::KernelEntry;
using mm::KernelFamily;
using mm::WType;

namespace {

// ---- weight types ----

bool wtype_of(GgmlType t, WeightLayout layout, WType* out) {
  if (layout == WeightLayout::Strips16) {
    if (t == GgmlType::Q4_K) *out = WType::Q4_K_S16;
    else if (t == GgmlType::Q5_K) *out = WType::Q5_K_S16;
    else if (t == GgmlType::Q6_K) *out = WType::Q6_K_S16;
    else if (t == GgmlType::Q4_0) *out = WType::Q4_0_S16;
    else if (t == GgmlType::Q4_1) *out = WType::Q4_1_S16;
    else if (t == GgmlType::Q5_0) *out = WType::Q5_0_S16;
    else if (t == GgmlType::Q5_1) *out = WType::Q5_1_S16;
    else if (t == GgmlType::Q8_0) *out = WType::Q8_0_S16;
    else return false;
    return true;
  }
  if (layout != WeightLayout::Gguf) return false;
  switch (t) {
    case GgmlType::F32: *out = WType::F32; return true;
    case GgmlType::F16: *out = WType::F16; return true;
    case GgmlType::BF16: *out = WType::BF16; return true;
    case GgmlType::Q4_0: *out = WType::Q4_0; return true;
    case GgmlType::Q4_1: *out = WType::Q4_1; return true;
    case GgmlType::Q5_0: *out = WType::Q5_0; return true;
    case GgmlType::Q5_1: *out = WType::Q5_1; return true;
    case GgmlType::Q8_0: *out = WType::Q8_0; return true;
    case GgmlType::Q2_K: *out = WType::Q2_K; return true;
    case GgmlType::Q3_K: *out = WType::Q3_K; return true;
    case GgmlType::Q4_K: *out = WType::Q4_K; return true;
    case GgmlType::Q5_K: *out = WType::Q5_K; return true;
    case GgmlType::Q6_K: *out = WType::Q6_K; return true;
    case GgmlType::FQ3: *out = WType::FQ3; return true;
    default: return false;
  }
}

// ---- kernel families and their selection ----

struct Caps {
  bool avx2 = false, avxvnni = false, avx512 = false;
};

Caps detect_caps() {
  Caps c;
  const CpuFeatures& f = cpu_features();
  c.avx2 = f.x86_64_v3();
  c.avxvnni = f.avx2_vnni();
  c.avx512 = f.avx512_vnni();
  return c;
}

const Caps& caps() {
  static const Caps c = detect_caps();
  return c;
}

const KernelFamily* family_of(MatmulKernels k) {
  switch (k) {
    case MatmulKernels::Scalar: return mm::family_scalar();
    case MatmulKernels::Avx2: return caps().avx2 ? mm::family_avx2() : nullptr;
    case MatmulKernels::AvxVnni: return caps().avxvnni ? mm::family_avxvnni() : nullptr;
    case MatmulKernels::Avx512: return caps().avx512 ? mm::family_avx512() : nullptr;
  }
  return nullptr;
}

const char* kernels_label(MatmulKernels k) {
  switch (k) {
    case MatmulKernels::Scalar: return "scalar";
    case MatmulKernels::Avx2: return "avx2";
    case MatmulKernels::AvxVnni: return "avxvnni";
    case MatmulKernels::Avx512: return "avx512";
  }
  return "?";
}

// The family chosen at first use: FISH_CPU_KERNELS of the process's
// configuration if set (a family this CPU cannot run is an error, not a silent
// fallback; an unknown value was already a warning there), else the widest
// the CPU supports.
struct Choice {
  const KernelFamily* family = nullptr;
  std::string error;
};

Choice choose_family() {
  Choice c;
  const CpuKernels want = EngineConfig::process().cpu_kernels;
  if (want != CpuKernels::Auto) {
    const MatmulKernels k = want == CpuKernels::Scalar    ? MatmulKernels::Scalar
                            : want == CpuKernels::Avx2    ? MatmulKernels::Avx2
                            : want == CpuKernels::AvxVnni ? MatmulKernels::AvxVnni
                                                          : MatmulKernels::Avx512;
    c.family = family_of(k);
    if (!c.family)
      c.error = std::string("FISH_CPU_KERNELS=") + kernels_label(k) + ": this CPU (or build) cannot run the " +
                kernels_label(k) + " kernels" +
                (k == MatmulKernels::Avx512    ? " (they need AVX-512 F/BW/VL/DQ + VNNI)"
                 : k == MatmulKernels::AvxVnni ? " (they need AVX2 + FMA + F16C + AVX-VNNI)"
                                               : " (they need AVX2 + FMA + F16C)");
    return c;
  }
  for (MatmulKernels k : {MatmulKernels::Avx512, MatmulKernels::AvxVnni, MatmulKernels::Avx2, MatmulKernels::Scalar})
    if ((c.family = family_of(k))) break;
  return c;
}

std::atomic<const KernelFamily*> g_forced{nullptr};

const KernelFamily& active_family() {
  if (const KernelFamily* f = g_forced.load(std::memory_order_acquire)) return *f;
  static const Choice c = choose_family();
  if (!c.family) throw Error("matmul: " + c.error);
  return *c.family;
}

// ---- checks ----

struct Resolved {
  WType wt;
  KernelEntry e;
};

Resolved resolve(const KernelFamily& fam, const WeightView& w, const char* what) {
  Resolved r;
  if (w.layout != WeightLayout::Gguf && w.layout != WeightLayout::Strips16)
    throw Error(std::string(what) + ": unknown weight layout " + std::to_string(int(w.layout)));
  if (!wtype_of(w.type, w.layout, &r.wt)) {
    if (w.layout == WeightLayout::Strips16)
      throw Error(std::string(what) + ": weight type " + ggml_type_name(w.type) +
                  " has no 16-row strip layout (strips: Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)");
    throw Error(std::string(what) + ": weight type " + ggml_type_name(w.type) +
                " is not supported (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, "
                "Q5_K, Q6_K, FQ3)");
  }
  const auto info = ggml_type_info(w.type);
  if (w.n_in <= 0 || w.n_out < 0)
    throw Error(std::string(what) + ": bad weight shape n_in " + std::to_string(w.n_in) + ", n_out " +
                std::to_string(w.n_out));
  if (w.n_in % info->block_size != 0)
    throw Error(std::string(what) + ": n_in " + std::to_string(w.n_in) + " is not a multiple of the " +
                info->name + " block size " + std::to_string(info->block_size));
  const uint64_t need = *ggml_row_bytes(uint32_t(w.type), w.n_in);
  if (w.row_bytes < need)
    throw Error(std::string(what) + ": row_bytes " + std::to_string(w.row_bytes) + " is less than the " +
                std::to_string(need) + " bytes of a " + info->name + " row of " + std::to_string(w.n_in));
  if (w.layout == WeightLayout::Strips16 && w.row_bytes != need)
    throw Error(std::string(what) + ": row_bytes " + std::to_string(w.row_bytes) + " of a strip-layout weight must be " +
                "the exact " + std::to_string(need) + " bytes of a " + info->name + " row of " + std::to_string(w.n_in));
  if (w.n_out > 0 && !w.data) throw Error(std::string(what) + ": weight data is null");
  r.e = fam.entry[int(r.wt)];
  if (!r.e.fn) r.e = mm::family_scalar()->entry[int(r.wt)];
  return r;
}

// ---- scratch: the quantised activations, grown once and reused ----

struct Scratch {
  std::vector<uint8_t> buf;
  uint8_t* get(size_t n) {
    if (buf.size() < n + 64) buf.resize(n + 64);
    const auto p = reinterpret_cast<uintptr_t>(buf.data());
    return buf.data() + ((64 - p % 64) % 64);
  }
};

// Waits until counter reaches target (all threads of one ThreadPool::run are
// running the job, so a short spin is cheaper than a wake-up).
void spin_until(const std::atomic<int>& counter, int target) {
  int spins = 0;
  while (counter.load(std::memory_order_acquire) < target) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (++spins > 4096) std::this_thread::yield();
  }
}

// One weight of a call, ready to run.
struct Task {
  mm::KernelFn fn;
  const uint8_t* w;
  uint64_t w_stride;
  int64_t n_in, n_out;
  ActLayout layout;  // the activation layout its kernel reads
  float* y;
};

constexpr int kMaxLayouts = int(ActLayout::Count);
constexpr int kMaxTasks = 8;  // weights per run_tasks call (matmul_group splits longer lists)
constexpr int64_t kRowGrain = 16;  // rows per split unit: 64 bytes of y per token, no false sharing

void run_tasks(ThreadPool& pool, const Task* tasks, int n_tasks, const KernelFamily& fam, const float* x,
               int n_tok) {
  const int64_t n_in = tasks[0].n_in;
  // Distinct activation layouts, each quantised once.
  ActLayout layouts[kMaxLayouts];
  int n_layouts = 0;
  int slot_of[int(ActLayout::Count)];
  for (int& s : slot_of) s = -1;
  for (int i = 0; i < n_tasks; ++i) {
    const ActLayout l = tasks[i].layout;
    if (slot_of[int(l)] < 0) {
      slot_of[int(l)] = n_layouts;
      layouts[n_layouts++] = l;
    }
  }
  uint64_t act_stride[kMaxLayouts];
  uint64_t act_off[kMaxLayouts];
  uint64_t total = 0;
  for (int s = 0; s < n_layouts; ++s) {
    act_stride[s] = layouts[s] == ActLayout::F32 ? uint64_t(n_in) * 4 : mm::act_row_bytes(layouts[s], n_in);
    act_off[s] = total;
    if (layouts[s] != ActLayout::F32) total += act_stride[s] * uint64_t(n_tok);
  }
  static thread_local Scratch scratch;
  uint8_t* base = scratch.get(size_t(total));
  const uint8_t* act[kMaxLayouts];
  for (int s = 0; s < n_layouts; ++s)
    act[s] = layouts[s] == ActLayout::F32 ? reinterpret_cast<const uint8_t*>(x) : base + act_off[s];

  auto quantize_rows = [&](int t0, int t1) {
    for (int s = 0; s < n_layouts; ++s) {
      const ActLayout l = layouts[s];
      if (l == ActLayout::F32) continue;
      const bool ggml = l == ActLayout::Q8_0 || l == ActLayout::Q8_1 || l == ActLayout::Q8_K;
      for (int t = t0; t < t1; ++t) {
        uint8_t* dst = base + act_off[s] + uint64_t(t) * act_stride[s];
        if (ggml) mm::quantize_act_scalar(l, x + int64_t(t) * n_in, n_in, dst);
        else fam.quantize(l, x + int64_t(t) * n_in, n_in, dst);
      }
    }
  };

  // Work units: runs of rows of one task, taken in order from an atomic
  // counter by whichever thread is free (a thread that is descheduled or slow
  // holds up one unit, not a fixed share). About kUnitsPerThread units per
  // thread, at least kRowGrain rows (64 bytes of y per token: no false
  // sharing) and at least kMinUnitBytes of weights. Each row's result does not
  // depend on which thread computes it, so outputs are bit-identical for any
  // thread count.
  constexpr uint64_t kUnitsPerThread = 8, kMinUnitBytes = 32u << 10;
  const int nth_pool = pool.size();
  uint64_t cost_total = 0;
  for (int i = 0; i < n_tasks; ++i) cost_total += uint64_t(tasks[i].n_out) * tasks[i].w_stride;
  uint64_t unit_bytes = cost_total / (uint64_t(nth_pool) * kUnitsPerThread);
  if (unit_bytes < kMinUnitBytes) unit_bytes = kMinUnitBytes;
  int64_t unit_rows[kMaxTasks], first_unit[kMaxTasks + 1];
  first_unit[0] = 0;
  for (int i = 0; i < n_tasks; ++i) {
    const Task& tk = tasks[i];
    int64_t rows = int64_t(unit_bytes / (tk.w_stride ? tk.w_stride : 1)) / kRowGrain * kRowGrain;
    if (rows < kRowGrain) rows = kRowGrain;
    unit_rows[i] = rows;
    first_unit[i + 1] = first_unit[i] + (tk.n_out + rows - 1) / rows;
  }
  const int64_t n_units = first_unit[n_tasks];

  auto run_unit = [&](int64_t u) {
    int i = 0;
    while (u >= first_unit[i + 1]) ++i;
    const Task& tk = tasks[i];
    mm::KernelArgs a;
    a.w = tk.w;
    a.w_stride = tk.w_stride;
    a.n_in = tk.n_in;
    const int s = slot_of[int(tk.layout)];
    a.act = act[s];
    a.act_stride = act_stride[s];
    a.n_tok = n_tok;
    a.y = tk.y;
    a.ldy = tk.n_out;
    a.r0 = (u - first_unit[i]) * unit_rows[i];
    a.r1 = a.r0 + unit_rows[i] < tk.n_out ? a.r0 + unit_rows[i] : tk.n_out;
    tk.fn(a);
  };

  // Small problems run on the calling thread: waking the pool costs more.
  const uint64_t work = cost_total * uint64_t(n_tok < 16 ? n_tok : 16);
  if (nth_pool <= 1 || n_units <= 1 || work < (64u << 10)) {
    quantize_rows(0, n_tok);
    for (int64_t u = 0; u < n_units; ++u) run_unit(u);
    return;
  }
  // Many tokens: the threads also share the quantisation (one token row per
  // claim) and start on the matmul once every row is done.
  const bool parallel_quant = int64_t(n_tok) * n_in >= 16384 && !(n_layouts == 1 && layouts[0] == ActLayout::F32);
  if (!parallel_quant) quantize_rows(0, n_tok);
  std::atomic<int> q_next{0}, q_done{0};
  std::atomic<int64_t> next{0};
  auto job = [&](int, int) {
    if (parallel_quant) {
      for (int t; (t = q_next.fetch_add(1, std::memory_order_relaxed)) < n_tok;) {
        quantize_rows(t, t + 1);
        q_done.fetch_add(1, std::memory_order_release);
      }
      spin_until(q_done, n_tok);
    }
    for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < n_units;) run_unit(u);
  };
  // A one-pointer closure fits std::function's inline buffer: no allocation per call.
  pool.run([j = &job](int ith, int nth) { (*j)(ith, nth); });
}

}  // namespace

void matmul(ThreadPool& pool, const WeightView& w, const float* x, int n_tok, float* y) {
  matmul_group(pool, &w, 1, x, n_tok, &y);
}

void matmul_group(ThreadPool& pool, const WeightView* ws, int n_w, const float* x, int n_tok,
                  float* const* ys) {
  if (n_w <= 0) return;
  if (n_tok < 0) throw Error("matmul: negative token count " + std::to_string(n_tok));
  const KernelFamily& fam = active_family();
  constexpr int kInline = kMaxTasks;
  Task inline_tasks[kInline];
  std::vector<Task> heap_tasks;
  Task* tasks = inline_tasks;
  if (n_w > kInline) {
    heap_tasks.resize(size_t(n_w));
    tasks = heap_tasks.data();
  }
  for (int i = 0; i < n_w; ++i) {
    const Resolved r = resolve(fam, ws[i], n_w == 1 ? "matmul" : "matmul_group");
    if (ws[i].n_in != ws[0].n_in)
      throw Error("matmul_group: weight " + std::to_string(i) + " has n_in " + std::to_string(ws[i].n_in) +
                  " but weight 0 has " + std::to_string(ws[0].n_in));
    if (n_tok > 0 && ws[i].n_out > 0 && !ys[i]) throw Error("matmul: output " + std::to_string(i) + " is null");
    tasks[i] = Task{r.e.fn, static_cast<const uint8_t*>(ws[i].data), ws[i].row_bytes, ws[i].n_in,
                    ws[i].n_out, r.e.layout, ys[i]};
  }
  if (n_tok == 0) return;
  if (!x) throw Error("matmul: input is null");
  for (int i = 0; i < n_w; i += kMaxTasks)
    run_tasks(pool, tasks + i, n_w - i < kMaxTasks ? n_w - i : kMaxTasks, fam, x, n_tok);
}

void matmul_ref_f32(const WeightView& w, const float* x, int n_tok, float* y) {
  resolve(*mm::family_scalar(), w, "matmul_ref_f32");
  std::vector<float> row(size_t(w.n_in));
  std::vector<uint8_t> raw(w.row_bytes);
  for (int64_t r = 0; r < w.n_out; ++r) {
    weight_row_gguf(w, r, raw.data());
    dequant_row(w.type, raw.data(), row.data(), w.n_in);
    for (int t = 0; t < n_tok; ++t) {
      const float* xt = x + int64_t(t) * w.n_in;
      double acc = 0.0;
      for (int64_t i = 0; i < w.n_in; ++i) acc += double(row[size_t(i)]) * double(xt[i]);
      y[int64_t(t) * w.n_out + r] = float(acc);
    }
  }
}

const char* matmul_kernel_name() { return active_family().name; }

const mm::KernelFamily& mm::active_kernel_family() { return active_family(); }

mm::KernelEntry mm::resolve_kernel(const KernelFamily& fam, const WeightView& w, const char* what) {
  return resolve(fam, w, what).e;
}

bool mm::active_family_has_strips() {
  const KernelFamily& f = active_family();
  if (&f == mm::family_scalar()) return false;
  for (int t = int(WType::Q4_K_S16); t <= int(WType::Q8_0_S16); ++t)  // every strip type (contiguous in WType)
    if (!f.entry[t].fn) return false;
  return true;
}

bool matmul_kernels_supported(MatmulKernels k) { return family_of(k) != nullptr; }

void matmul_use_kernels(MatmulKernels k) {
  const KernelFamily* f = family_of(k);
  if (!f) throw Error(std::string("matmul: this CPU cannot run the ") + kernels_label(k) + " kernels");
  g_forced.store(f, std::memory_order_release);
}

void matmul_use_default_kernels() { g_forced.store(nullptr, std::memory_order_release); }

}  // namespace fish
