// ThreadPool: a fixed set of workers that run one job at a time, the calling
// thread taking part. A job is nth = size() indices; each index is claimed by
// whichever thread gets to it first, so a thread that is descheduled (the cores
// are shared with other programs, the normal state of a laptop) holds up at most
// the index it is running, never a share it has not started: a contended run
// slows in proportion to the CPU it gets. Waiting threads spin briefly (a decode
// step issues ~10 jobs per layer, and waking through the kernel each time would
// cost more than the work), then sleep on a futex.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace fish {

class ThreadPool {
 public:
  // n_threads counts the caller: n_threads - 1 workers are started. <= 0: default.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(i, nth) once for each index i in [0, nth = size()) and returns when
  // all have finished. i is an index, not a thread: one thread may run several
  // indices in turn, so a job must not wait for another index of the same job.
  // Not re-entrant.
  void run(const std::function<void(int i, int nth)>& fn);

  // Splits [0, n) into contiguous chunks of at least `grain` items, one range per
  // index (balanced to within one grain), and calls fn(begin, end, i).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

  // One thread per physical core available to this process (at least 1).
  static int default_threads();

 private:
  void worker();
  // Claims and runs indices of generation `gen` until none is left.
  void claim_and_run(uint32_t gen);
  static void sleep_while(std::atomic<uint32_t>& word, uint32_t seen, std::atomic<int>& sleepers);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::atomic<const std::function<void(int, int)>*> job_{nullptr};
  // (generation << 32) | next unclaimed index: one CAS claims an index of one
  // job, so a worker that wakes late cannot claim from the next job.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<uint32_t> generation_{0};  // bumped per job (and at stop); workers wait on it
  std::atomic<uint32_t> done_{0};        // indices of the current job finished; the caller waits on it
  std::atomic<bool> stop_{false};
  std::atomic<int> workers_asleep_{0}, caller_asleep_{0};  // who sleeps on the futex (no wake syscall without)
};

}  // namespace fish
