// A job's channel between the scheduler thread and its HTTP thread: job.h.
#include "job.h"

namespace fish::serve {

void Job::push(Delta d) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Consecutive deltas the HTTP side has not taken yet merge into one.
    if (!pending_.empty()) {
      pending_.back().text += d.text;
      for (TokenLogprob& t : d.logprobs) pending_.back().logprobs.push_back(std::move(t));
    } else {
      pending_.push_back(std::move(d));
    }
  }
  cv_.notify_all();
}

void Job::finish(const std::string& finish_reason, const Usage& usage, const std::string& error) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (finished_) return;
    finished_ = true;
    finish_reason_ = finish_reason;
    usage_ = usage;
    error_ = error;
  }
  cv_.notify_all();
}

bool Job::wait(std::chrono::milliseconds timeout, std::vector<Delta>* out) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return finished_ || !pending_.empty(); });
  for (Delta& d : pending_) out->push_back(std::move(d));
  pending_.clear();
  return finished_;
}

void EmbedJob::finish(std::vector<float> vectors, const std::string& error) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (finished_) return;
    finished_ = true;
    vectors_ = std::move(vectors);
    error_ = error;
  }
  cv_.notify_all();
}

void EmbedJob::wait() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return finished_; });
}

}  // namespace fish::serve
