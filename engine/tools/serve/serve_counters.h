// What fish serve counts for /metrics: the scheduler's work (written by its
// thread, read by any) and the HTTP answers by endpoint and status.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace fish::serve {

struct ServeCounters {
  // Scheduler (monotonic unless noted).
  std::atomic<int64_t> jobs_started{0}, jobs_finished{0}, jobs_cancelled{0}, jobs_failed{0};
  std::atomic<int64_t> prompt_tokens{0};     // prompt tokens evaluated
  std::atomic<int64_t> cached_tokens{0};     // prompt tokens taken from the prefix cache instead
  std::atomic<int64_t> generated_tokens{0};
  std::atomic<int64_t> steps{0};             // fish_decode calls
  std::atomic<int64_t> prompt_us{0}, gen_us{0};  // step time, split by rows between prompt and decode rows
  std::atomic<int32_t> running{0}, queued{0};    // gauges
  std::atomic<int64_t> rejected_full{0};         // 503: the queue was full
  std::atomic<uint64_t> kv_bytes{0}, prefix_cache_bytes{0};  // gauges, after the last step

  // HTTP answers: (path, status) -> count.
  void count_request(const std::string& path, int status) {
    std::lock_guard<std::mutex> lk(mu_);
    ++requests_[{path, status}];
  }
  std::map<std::pair<std::string, int>, int64_t> requests() const {
    std::lock_guard<std::mutex> lk(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
};

}  // namespace fish::serve
