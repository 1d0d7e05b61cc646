// The matmul driver: checks the weights, picks the kernel family (cpuid, or
// FISH_CPU_KERNELS), quantises the activations once per call into a reusable
// per-thread buffer, and splits the output rows of one or several weights over
// the thread pool in one ThreadPool::run, balanced by weight bytes.
#include "cpu/matmul.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
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

bool wtype_of(GgmlType t, WType* out) {
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
    default: return false;
  }
}

// ---- kernel families and their selection ----

struct Caps {
  bool avx2 = false, avx512 = false;
};

Caps detect_caps() {
  Caps c;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  c.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
           __builtin_cpu_supports("bmi2");
  c.avx512 = c.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
#endif
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
    case MatmulKernels::Avx512: return caps().avx512 ? mm::family_avx512() : nullptr;
  }
  return nullptr;
}

const char* kernels_label(MatmulKernels k) {
  switch (k) {
    case MatmulKernels::Scalar: return "scalar";
    case MatmulKernels::Avx2: return "avx2";
    case MatmulKernels::Avx512: return "avx512";
  }
  return "?";
}

// The family chosen at first use: FISH_CPU_KERNELS if set (read once; an
// unknown value or a family this CPU cannot run is an error, not a silent
// fallback), else the widest the CPU supports.
struct Choice {
  const KernelFamily* family = nullptr;
  std::string error;
};

Choice choose_family() {
  Choice c;
  const char* env = std::getenv("FISH_CPU_KERNELS");
  if (env && *env) {
    const std::string v = env;
    MatmulKernels k;
    if (v == "scalar") k = MatmulKernels::Scalar;
    else if (v == "avx2") k = MatmulKernels::Avx2;
    else if (v == "avx512") k = MatmulKernels::Avx512;
    else {
      c.error = "FISH_CPU_KERNELS='" + v + "' is not a kernel family (expected scalar, avx2 or avx512)";
      return c;
    }
    c.family = family_of(k);
    if (!c.family)
      c.error = std::string("FISH_CPU_KERNELS=") + v + ": this CPU (or build) cannot run the " + v +
                " kernels" + (k == MatmulKernels::Avx512 ? " (they need AVX-512 F/BW/VL/DQ + VNNI)" : " (they need AVX2 + FMA + F16C)");
    return c;
  }
  for (MatmulKernels k : {MatmulKernels::Avx512, MatmulKernels::Avx2, MatmulKernels::Scalar})
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
  if (!wtype_of(w.type, &r.wt))
    throw Error(std::string(what) + ": weight type " + ggml_type_name(w.type) +
                " is not supported (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, "
                "Q5_K, Q6_K)");
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

// One-shot spin barrier for the threads of one ThreadPool::run (all of them
// run the job at the same time, so a spin is enough and cheaper than a wake-up).
struct SpinBarrier {
  std::atomic<int> arrived{0};
  void wait(int nth) {
    arrived.fetch_add(1, std::memory_order_acq_rel);
    int spins = 0;
    while (arrived.load(std::memory_order_acquire) < nth) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (++spins > 4096) std::this_thread::yield();
    }
  }
};

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

  // Cost of a row: its weight bytes (what a decode step streams); for many
  // tokens the compute is proportional to the same bytes within a type family.
  uint64_t cost_total = 0;
  for (int i = 0; i < n_tasks; ++i) cost_total += uint64_t(tasks[i].n_out) * tasks[i].w_stride;

  auto run_share = [&](int ith, int nth) {
    // Units of kRowGrain rows, task after task; thread ith takes the units whose
    // cost prefix falls in [cost_total * ith / nth, cost_total * (ith + 1) / nth).
    const uint64_t lo = cost_total * uint64_t(ith) / uint64_t(nth);
    const uint64_t hi = cost_total * uint64_t(ith + 1) / uint64_t(nth);
    uint64_t before = 0;
    for (int i = 0; i < n_tasks; ++i) {
      const Task& tk = tasks[i];
      const uint64_t unit_cost = uint64_t(kRowGrain) * tk.w_stride;
      const uint64_t task_cost = uint64_t(tk.n_out) * tk.w_stride;
      const int64_t n_units = (tk.n_out + kRowGrain - 1) / kRowGrain;
      // First unit whose start cost is >= lo (and likewise for hi): units are
      // assigned by where they start, so every unit goes to exactly one thread.
      auto unit_at = [&](uint64_t c) -> int64_t {
        if (c <= before) return 0;
        if (c >= before + task_cost) return n_units;
        const int64_t u = int64_t((c - before + unit_cost - 1) / unit_cost);
        return u < n_units ? u : n_units;
      };
      const int64_t u0 = unit_at(lo), u1 = ith == nth - 1 ? n_units : unit_at(hi);
      before += task_cost;
      if (u0 >= u1) continue;
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
      a.r0 = u0 * kRowGrain;
      a.r1 = u1 * kRowGrain < tk.n_out ? u1 * kRowGrain : tk.n_out;
      tk.fn(a);
    }
  };

  // Small problems run on the calling thread: waking the pool costs more.
  const uint64_t work = cost_total * uint64_t(n_tok < 16 ? n_tok : 16);
  const int nth = pool.size();
  if (nth <= 1 || work < (64u << 10)) {
    quantize_rows(0, n_tok);
    run_share(0, 1);
    return;
  }
  const bool parallel_quant = int64_t(n_tok) * n_in >= 16384 && n_layouts > 0 &&
                              !(n_layouts == 1 && layouts[0] == ActLayout::F32);
  if (!parallel_quant) {
    quantize_rows(0, n_tok);
    pool.run([&](int ith, int n) { run_share(ith, n); });
    return;
  }
  SpinBarrier barrier;
  pool.run([&](int ith, int n) {
    quantize_rows(int(int64_t(n_tok) * ith / n), int(int64_t(n_tok) * (ith + 1) / n));
    barrier.wait(n);
    run_share(ith, n);
  });
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
  constexpr int kInline = 8;
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
  run_tasks(pool, tasks, n_w, fam, x, n_tok);
}

void matmul_ref_f32(const WeightView& w, const float* x, int n_tok, float* y) {
  resolve(*mm::family_scalar(), w, "matmul_ref_f32");
  std::vector<float> row(size_t(w.n_in));
  for (int64_t r = 0; r < w.n_out; ++r) {
    dequant_row(w.type, static_cast<const uint8_t*>(w.data) + uint64_t(r) * w.row_bytes, row.data(), w.n_in);
    for (int t = 0; t < n_tok; ++t) {
      const float* xt = x + int64_t(t) * w.n_in;
      double acc = 0.0;
      for (int64_t i = 0; i < w.n_in; ++i) acc += double(row[size_t(i)]) * double(xt[i]);
      y[int64_t(t) * w.n_out + r] = float(acc);
    }
  }
}

const char* matmul_kernel_name() { return active_family().name; }

bool matmul_kernels_supported(MatmulKernels k) { return family_of(k) != nullptr; }

void matmul_use_kernels(MatmulKernels k) {
  const KernelFamily* f = family_of(k);
  if (!f) throw Error(std::string("matmul: this CPU cannot run the ") + kernels_label(k) + " kernels");
  g_forced.store(f, std::memory_order_release);
}

void matmul_use_default_kernels() { g_forced.store(nullptr, std::memory_order_release); }

}  // namespace fish
