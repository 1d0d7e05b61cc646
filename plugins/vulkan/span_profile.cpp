// The span's profile (see span_profile.h).
#include "span_profile.h"

#include <algorithm>
#include <cstdio>

namespace fish::vk {

SpanProfile::SpanProfile(const Device& dev, int level, int n_layers) : dev_(dev), level_(level) {
  if (level <= 0 || dev.caps().timestamp_period_ns <= 0) return;
  // At most a dozen stages per layer, and those around the layers.
  capacity_ = uint32_t(n_layers) * 16 + 16;
  auto qci = vk_init<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
  qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qci.queryCount = capacity_;
  if (dev.fns().vkCreateQueryPool(dev.handle(), &qci, nullptr, &pool_) != VK_SUCCESS) pool_ = VK_NULL_HANDLE;
}

SpanProfile::~SpanProfile() {
  if (pool_) dev_.fns().vkDestroyQueryPool(dev_.handle(), pool_, nullptr);
}

void SpanProfile::begin(VkCommandBuffer cmd) {
  recording_ = &recorded_[cmd];
  recording_->names.clear();
  recording_->cats.clear();
  next_ = 0;
  dev_.fns().vkCmdResetQueryPool(cmd, pool_, 0, capacity_);
  dev_.fns().vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool_, next_++);
}

void SpanProfile::stage(VkCommandBuffer cmd, const char* name, const char* category) {
  if (level_ < 2 || next_ >= capacity_ || !recording_) return;
  dev_.fns().vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, next_++);
  recording_->names.push_back(name);
  recording_->cats.push_back(category);
}

void SpanProfile::use(VkCommandBuffer cmd) {
  auto it = recorded_.find(cmd);
  used_ = it != recorded_.end() ? &it->second : nullptr;
}

void SpanProfile::end(VkCommandBuffer cmd) {
  if (level_ >= 2) return;  // the last stage's stamp ends the recording
  dev_.fns().vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool_, next_++);
}

void SpanProfile::add_submission(int n_tok) {
  if (level_ >= 2 && !used_) return;
  const uint32_t n = level_ >= 2 ? uint32_t(used_->names.size()) + 1 : 2u;
  std::vector<uint64_t> ts(n);
  if (dev_.fns().vkGetQueryPoolResults(dev_.handle(), pool_, 0, n, ts.size() * 8, ts.data(), 8,
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
    return;
  const double period = double(dev_.caps().timestamp_period_ns) * 1e-9;
  const double total = double(ts.back() - ts.front()) * period;
  gpu_s_ += total;
  // Stages of decode (one token) and of prefill (more than 4) are kept apart.
  const bool decode = n_tok == 1;
  if (!decode && n_tok <= 4) return;
  (decode ? decode_gpu_s_ : prefill_gpu_s_) += total;
  if (!decode) prefill_tokens_ += uint64_t(n_tok);
  auto& stages = decode ? stages_ : prefill_stages_;
  for (size_t i = 0; level_ >= 2 && i + 1 < n; ++i) {
    Stage& st = stages[used_->names[i]];
    st.category = used_->cats[i];
    st.seconds += double(ts[i + 1] - ts[i]) * period;
  }
}

// The categories' shares, then every stage (per `unit` of work: `per` of them).
std::string SpanProfile::stage_table(const std::map<std::string, Stage>& stages, const char* what, double total_s,
                                     double per, const char* unit) {
  char buf[256];
  std::vector<std::pair<double, std::string>> cats;
  for (const auto& [name, st] : stages) {
    const std::string& category = st.category;  // clang 14 cannot capture a structured binding
    auto it = std::find_if(cats.begin(), cats.end(), [&](const auto& c) { return c.second == category; });
    if (it == cats.end()) cats.emplace_back(st.seconds, st.category);
    else it->first += st.seconds;
  }
  std::sort(cats.rbegin(), cats.rend());
  std::string s = std::string("\nvulkan span ") + what + " stages (FISH_GPU_PROFILE=2, share of device time):";
  for (const auto& [sec, cat] : cats) {
    std::snprintf(buf, sizeof buf, " %s %.1f%%,", cat.c_str(), 100.0 * sec / total_s);
    s += buf;
  }
  s.pop_back();
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [name, st] : stages) order.emplace_back(st.seconds, name);
  std::sort(order.rbegin(), order.rend());
  for (const auto& [sec, name] : order) {
    std::snprintf(buf, sizeof buf, "\n  %-40s %8.4f ms per %s  %5.1f%%", name.c_str(), sec * 1e3 / per, unit,
                  100.0 * sec / total_s);
    s += buf;
  }
  return s;
}

void SpanProfile::add_forward(int n_tok, double wall_s) {
  ++forwards_;
  tokens_ += uint64_t(n_tok);
  wall_s_ += wall_s;
  if (n_tok == 1) ++decode_, decode_wall_s_ += wall_s;
}

void SpanProfile::add_decode_host(double prep_s, double wait_s, double copy_s) {
  decode_prep_s_ += prep_s;
  decode_wait_s_ += wait_s;
  decode_copy_s_ += copy_s;
}

std::string SpanProfile::report(int first_layer, int last_layer) {
  if (forwards_ == 0) return "";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "vulkan span (layers %d..%d): %llu forwards (%llu decode), %llu tokens, %llu submits, wall %.3f ms",
                first_layer, last_layer, (unsigned long long)forwards_, (unsigned long long)decode_,
                (unsigned long long)tokens_, (unsigned long long)submits_, wall_s_ * 1e3);
  std::string s = buf;
  if (decode_ > 0) {
    std::snprintf(buf, sizeof buf, "\nvulkan span decode: %.3f ms wall per token", decode_wall_s_ * 1e3 / double(decode_));
    s += buf;
    if (decode_gpu_s_ > 0) {
      std::snprintf(buf, sizeof buf, ", %.3f ms on the device (GPU timestamps)", decode_gpu_s_ * 1e3 / double(decode_));
      s += buf;
    }
    const double us = 1e6 / double(decode_);
    std::snprintf(buf, sizeof buf,
                  "\nvulkan span decode, host side per token: %.1f us preparing x and the ctrl block, %.1f us from "
                  "submit to the fence, %.1f us copying x and the logits out",
                  decode_prep_s_ * us, decode_wait_s_ * us, decode_copy_s_ * us);
    s += buf;
  }
  if (!stages_.empty() && decode_gpu_s_ > 0) s += stage_table(stages_, "decode", decode_gpu_s_, double(decode_), "token");
  if (!prefill_stages_.empty() && prefill_gpu_s_ > 0) {
    std::snprintf(buf, sizeof buf, "\nvulkan span prefill: %.1f tok/s on the device (GPU timestamps, forwards of > 4 tokens)",
                  double(prefill_tokens_) / prefill_gpu_s_);
    s += buf;
    s += stage_table(prefill_stages_, "prefill", prefill_gpu_s_, double(prefill_tokens_) / 1000.0, "1k tokens");
  }
  stages_.clear();
  prefill_stages_.clear();
  prefill_gpu_s_ = 0;
  prefill_tokens_ = 0;
  forwards_ = decode_ = tokens_ = submits_ = 0;
  wall_s_ = gpu_s_ = decode_wall_s_ = decode_gpu_s_ = 0;
  decode_prep_s_ = decode_wait_s_ = decode_copy_s_ = 0;
  return s;
}

}  // namespace fish::vk
