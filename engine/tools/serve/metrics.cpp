// Prometheus text for /metrics: see metrics.h.
#include "serve/metrics.h"

#include <cstdio>

namespace fish::serve {

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  char num[64];
  std::snprintf(num, sizeof num, "%.17g", value);
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + num + "\n";
}

}  // namespace

std::string prometheus_text(const ServeCounters& c, int32_t n_slots) {
  std::string out;
  out += "# HELP fish_http_requests_total HTTP requests answered, by path and status.\n"
         "# TYPE fish_http_requests_total counter\n";
  for (const auto& [key, n] : c.requests())
    out += "fish_http_requests_total{path=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  metric(out, "fish_requests_started_total", "counter", "Generation requests that got a sequence.",
         double(c.jobs_started));
  metric(out, "fish_requests_finished_total", "counter", "Generation requests that ended normally.",
         double(c.jobs_finished));
  metric(out, "fish_requests_cancelled_total", "counter", "Generation requests whose client went away.",
         double(c.jobs_cancelled));
  metric(out, "fish_requests_failed_total", "counter", "Generation requests that ended with an error.",
         double(c.jobs_failed));
  metric(out, "fish_requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.",
         double(c.rejected_full));
  metric(out, "fish_requests_running", "gauge", "Requests holding a sequence now.", double(c.running));
  metric(out, "fish_requests_queued", "gauge", "Requests waiting for a sequence.", double(c.queued));
  metric(out, "fish_slots", "gauge", "Sequences the model holds (-np).", double(n_slots));
  metric(out, "fish_prompt_tokens_total", "counter", "Prompt tokens evaluated.", double(c.prompt_tokens));
  metric(out, "fish_prompt_tokens_cached_total", "counter", "Prompt tokens taken from the prefix cache.",
         double(c.cached_tokens));
  metric(out, "fish_generated_tokens_total", "counter", "Tokens generated.", double(c.generated_tokens));
  metric(out, "fish_decode_steps_total", "counter", "Batches evaluated (one fish_decode each).", double(c.steps));
  const double ps = double(c.prompt_us) * 1e-6, gs = double(c.gen_us) * 1e-6;
  metric(out, "fish_prompt_seconds_total", "counter", "Evaluation time spent on prompt rows.", ps);
  metric(out, "fish_generation_seconds_total", "counter", "Evaluation time spent on generation rows.", gs);
  metric(out, "fish_prompt_tokens_per_second", "gauge", "Prompt tokens evaluated per second of prompt time.",
         ps > 0 ? double(c.prompt_tokens) / ps : 0.0);
  metric(out, "fish_generation_tokens_per_second", "gauge", "Tokens generated per second of generation time.",
         gs > 0 ? double(c.generated_tokens) / gs : 0.0);
  metric(out, "fish_kv_cache_bytes", "gauge", "CPU KV cache pages allocated.", double(c.kv_bytes));
  metric(out, "fish_prefix_cache_bytes", "gauge", "KV pages kept for reuse by released sequences.",
         double(c.prefix_cache_bytes));
  return out;
}

}  // namespace fish::serve
