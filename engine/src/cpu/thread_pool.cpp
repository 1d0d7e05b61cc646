#include "cpu/thread_pool.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <thread>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define FISH_PAUSE() _mm_pause()
#else
#define FISH_PAUSE() std::this_thread::yield()
#endif

namespace fish {

namespace {
// How long a waiting thread spins before it sleeps on the futex. Long enough
// to cover the gap between two jobs of a decode step (a few µs), short enough
// that a spinning thread does not take a shared core from one with work.
constexpr auto kSpin = std::chrono::microseconds(100);

// The kernel's futex on a 32-bit atomic: sleep while *word == expected; wake
// every sleeper. Callers count their sleepers, so a wake with nobody asleep
// (the usual case while jobs come fast) costs no system call.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word");

// Spins until pred() holds or kSpin has passed; returns pred().
template <class Pred>
bool spin_for(Pred pred) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int spins = 1;; ++spins) {
    if (pred()) return true;
    FISH_PAUSE();
    if (spins % 64 == 0 && std::chrono::steady_clock::now() - t0 > kSpin) return pred();
  }
}
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
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  futex_wake_all(generation_);
  for (auto& t : workers_) t.join();
}

// Sleeps until word != seen. The sleeper count and the waker's check are both
// sequentially consistent: either the waker sees a sleeper, or the sleeper sees
// the new value before it sleeps (and the kernel re-checks it atomically).
void ThreadPool::sleep_while(std::atomic<uint32_t>& word, uint32_t seen, std::atomic<int>& sleepers) {
  sleepers.fetch_add(1);
  while (word.load() == seen) futex_wait(word, seen);
  sleepers.fetch_sub(1);
}

void ThreadPool::claim_and_run(uint32_t gen) {
  const uint64_t n = uint64_t(n_threads_);
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if ((t >> 32) != gen || (t & 0xffffffffu) >= n) return;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    // The claim keeps the job alive: run() returns only when every index is done.
    (*job_.load(std::memory_order_acquire))(int(t & 0xffffffffu), n_threads_);
    if (done_.fetch_add(1) + 1 == uint32_t(n) && caller_asleep_.load() > 0) futex_wake_all(done_);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker() {
  // The generation the pool had when it started this thread (not what it has
  // when the thread gets to run: a job or the stop may be published by then).
  uint32_t seen = 0;
  for (;;) {
    if (!spin_for([&] { return generation_.load(std::memory_order_acquire) != seen; }))
      sleep_while(generation_, seen, workers_asleep_);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    claim_and_run(seen);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_.store(&fn, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  ticket_.store(uint64_t(gen) << 32, std::memory_order_release);
  generation_.store(gen);
  if (workers_asleep_.load() > 0) futex_wake_all(generation_);
  claim_and_run(gen);
  // Every index is claimed; wait for the ones other threads are running.
  const uint32_t n = uint32_t(n_threads_);
  if (!spin_for([&] { return done_.load(std::memory_order_acquire) == n; })) {
    caller_asleep_.fetch_add(1);
    for (uint32_t d; (d = done_.load()) != n;) futex_wait(done_, d);
    caller_asleep_.fetch_sub(1);
  }
  job_.store(nullptr, std::memory_order_relaxed);
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
