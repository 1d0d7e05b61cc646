#include "cpu/thread_pool.h"

#include <sched.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define FISH_PAUSE() _mm_pause()
#else
#define FISH_PAUSE() std::this_thread::yield()
#endif

namespace fish {

namespace {
// How long a worker spins for the next job before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(2000);
// Pause-spins (~10-40 ns each) before a waiting thread starts yielding its CPU.
constexpr int kSpinsBeforeYield = 20000;
}  // namespace

int ThreadPool::default_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    const unsigned hc = std::thread::hardware_concurrency();
    return hc ? int(hc) : 1;
  }
  // Count distinct (package, core) pairs among the CPUs we may run on.
  std::set<std::pair<std::string, std::string>> cores;
  int n_cpus = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    ++n_cpus;
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    std::ifstream pf(base + "physical_package_id"), cf(base + "core_id");
    std::string p, k;
    if (!(pf >> p) || !(cf >> k)) return n_cpus > 0 ? CPU_COUNT(&set) : 1;
    cores.emplace(p, k);
  }
  return cores.empty() ? 1 : int(cores.size());
}

ThreadPool::ThreadPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : default_threads();
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int ith) {
  uint64_t seen = 0;
  for (;;) {
    // Spin, then sleep, until a new generation (job or stop) is published.
    auto t0 = std::chrono::steady_clock::now();
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen) {
      if (++spins < kSpinsBeforeYield) FISH_PAUSE();
      else sched_yield();  // let a thread that shares this CPU run (see run())
      if (spins % 1024 == 0 && std::chrono::steady_clock::now() - t0 > kSpin) {
        std::unique_lock<std::mutex> lk(mu_);
        sleepers_.fetch_add(1);
        cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        sleepers_.fetch_sub(1);
        break;
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    (*job_)(ith, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // The lock orders the publication against a worker that is about to sleep.
    std::lock_guard<std::mutex> lk(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  fn(0, n_threads_);
  // Spin briefly (the usual wait is ~1 µs), then yield: when the machine is
  // oversubscribed a worker may share this CPU, and spinning until the
  // scheduler's tick would cost milliseconds per job.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinsBeforeYield) FISH_PAUSE();
    else sched_yield();
  }
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t chunks = (n + grain - 1) / grain;
  const int nth = int(std::min<int64_t>(n_threads_, chunks));
  if (nth <= 1) {
    fn(0, n, 0);
    return;
  }
  run([&](int ith, int) {
    if (ith >= nth) return;
    const int64_t c0 = chunks * ith / nth, c1 = chunks * (ith + 1) / nth;
    const int64_t b = c0 * grain, e = std::min(n, c1 * grain);
    if (b < e) fn(b, e, ith);
  });
}

}  // namespace fish
