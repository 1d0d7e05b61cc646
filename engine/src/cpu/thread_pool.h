// ThreadPool: a fixed set of workers that run one job at a time, the calling
// thread taking part. Workers spin briefly between jobs (a decode step issues
// ~10 jobs per layer, so waking through the kernel each time would cost more
// than the work), then sleep on a condition variable.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
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

  // Calls fn(ith, nth) once on each of the nth = size() threads (the caller is
  // ith 0) and returns when all have finished. Not re-entrant.
  void run(const std::function<void(int ith, int nth)>& fn);

  // Splits [0, n) into contiguous chunks of at least `grain` items, one range per
  // thread (balanced to within one grain), and calls fn(begin, end, ith).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

  // One thread per physical core available to this process (at least 1).
  static int default_threads();

 private:
  void worker(int ith);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

}  // namespace fish
