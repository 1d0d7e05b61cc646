// ThreadPool: every index of a job runs exactly once, on any thread, whatever
// the number of threads against the cores (oversubscribed here on purpose: a
// 2-core machine with 8 threads is the contended case), and parallel_for covers
// its range exactly once. (Catch2's assertions are not thread-safe: jobs
// record what they saw, and the test asserts on the calling thread.)
#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cpu/thread_pool.h"

using namespace fish;

TEST_CASE("ThreadPool runs each index of every job exactly once", "[thread_pool]") {
  for (int nth : {1, 2, 3, 8}) {
    ThreadPool pool(nth);
    REQUIRE(pool.size() == nth);
    std::vector<std::atomic<int>> hits(size_t(nth) * 2000);
    std::atomic<int> wrong_nth{0};
    for (int job = 0; job < 2000; ++job) {
      pool.run([&](int i, int n) {
        if (n != nth) wrong_nth.fetch_add(1);
        hits[size_t(job) * size_t(nth) + size_t(i)].fetch_add(1);
      });
      // run() has returned: every index of this job is done, none of the next.
      for (int i = 0; i < nth; ++i) REQUIRE(hits[size_t(job) * size_t(nth) + size_t(i)].load() == 1);
    }
    CHECK(wrong_nth.load() == 0);
  }
}

TEST_CASE("ThreadPool: a slow index holds up only itself, the other threads take the free indices", "[thread_pool]") {
  ThreadPool pool(4);
  // Index 0..3 of one job: whoever claims the first index waits until the
  // other three are done (10 s at most, so a broken pool fails instead of
  // hanging). That completes only if the other threads (workers or the
  // caller, whichever is scheduled: on a loaded 2-core machine the workers may
  // claim every index before the caller gets to) run the free indices while
  // the first is held.
  std::atomic<int> others_done{0}, first{1};
  std::atomic<bool> waited_out{false};
  pool.run([&](int, int) {
    if (first.exchange(0)) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (others_done.load() < 3) {
        if (std::chrono::steady_clock::now() > until) {
          waited_out.store(true);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    } else {
      others_done.fetch_add(1);
    }
  });
  CHECK_FALSE(waited_out.load());
  CHECK(others_done.load() == 3);
}

TEST_CASE("ThreadPool::parallel_for covers 0..n-1 exactly once in grain-sized chunks", "[thread_pool]") {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 64, 1000, 4097})
    for (int64_t grain : {1, 4, 100}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::atomic<int> calls{0}, bad{0};
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int i) {
        if (b >= e || i < 0 || i >= pool.size() || b % grain != 0) bad.fetch_add(1);
        for (int64_t k = b; k < e; ++k) seen[size_t(k)].fetch_add(1);
        calls.fetch_add(1);
      });
      CHECK(bad.load() == 0);
      for (int64_t k = 0; k < n; ++k) REQUIRE(seen[size_t(k)].load() == 1);
      CHECK(calls.load() <= std::min<int64_t>(pool.size(), (n + grain - 1) / grain));
    }
}

TEST_CASE("ThreadPool: workers asleep between jobs wake for the next and stop cleanly", "[thread_pool]") {
  std::atomic<int> total{0};
  {
    ThreadPool pool(3);
    for (int round = 0; round < 3; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin: workers sleep
      std::set<int> idx;
      std::mutex mu;
      pool.run([&](int i, int) {
        std::lock_guard<std::mutex> lk(mu);
        idx.insert(i);
        total.fetch_add(1);
      });
      CHECK(idx == std::set<int>{0, 1, 2});
    }
  }  // the destructor joins sleeping workers
  CHECK(total.load() == 9);
}
