// One generation request as the scheduler runs it (a "job"): what to
// generate, and the channel its results come back through. The HTTP thread
// that made it waits on the channel; the scheduler thread fills it.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fish/fish.h"

namespace fish::serve {

struct GenParams {
  fish_sampler_params sampler = fish_sampler_default_params();
  int32_t max_tokens = -1;         // < 0: until the context's end
  std::vector<std::string> stop;   // stop strings (never part of the text)
  int32_t top_logprobs = -1;       // < 0: no logprobs; n >= 0: the chosen token's and the n likeliest
  bool ignore_eos = false;
  bool json_object = false;        // response_format json_object: fish_sampler_constrain_json
  std::string json_schema;         // response_format json_schema: the schema's text ("": none)
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id, added to its logit (-100: never)
  // Control tokens whose text goes out as any other piece (their pieces are
  // empty otherwise): the tool-call markers of the template's family.
  std::vector<int32_t> keep_special;
  bool constrained() const { return json_object || !json_schema.empty(); }
};

// The log-probability of one generated token under the model (the logits
// before temperature and truncation), and the likeliest alternatives.
struct TokenLogprob {
  int32_t id = 0;
  std::string piece;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // piece, logprob; likeliest first
};

// Text that can go out, and the tokens sampled since the previous delta.
struct Delta {
  std::string text;
  std::vector<TokenLogprob> logprobs;  // empty unless logprobs were asked for
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens the prefix cache held (not evaluated)
};

class Job {
 public:
  Job(std::vector<int32_t> prompt, GenParams params) : prompt(std::move(prompt)), params(std::move(params)) {}

  const std::vector<int32_t> prompt;
  const GenParams params;
  const std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();

  // The client went away (or the server aborts): the scheduler frees the
  // sequence at its next step. Callers use Scheduler::cancel, which wakes it.
  std::atomic<bool> cancelled{false};

  // ---- scheduler side ------------------------------------------------------
  void push(Delta d);
  // The end: "stop" or "length", or an error message (error non-empty).
  void finish(const std::string& finish_reason, const Usage& usage, const std::string& error = "");

  // ---- HTTP side -----------------------------------------------------------
  // Waits up to timeout for news; moves out the deltas that came. True once
  // the job has finished (and every delta has been taken).
  bool wait(std::chrono::milliseconds timeout, std::vector<Delta>* out);
  // After wait() returned true:
  const std::string& finish_reason() const { return finish_reason_; }
  const std::string& error() const { return error_; }
  const Usage& usage() const { return usage_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Delta> pending_;
  bool finished_ = false;
  std::string finish_reason_, error_;
  Usage usage_;
};

// One /v1/embeddings request: its inputs as token ids, evaluated by the
// scheduler thread on the sequence it keeps for embeddings (fish_embed_tokens);
// the HTTP thread waits for the vectors.
class EmbedJob {
 public:
  EmbedJob(std::vector<std::vector<int32_t>> inputs, fish_embed_params params)
      : inputs(std::move(inputs)), params(params) {}

  const std::vector<std::vector<int32_t>> inputs;
  const fish_embed_params params;

  // Scheduler side: the vectors [inputs.size() * n_embd], or an error.
  void finish(std::vector<float> vectors, const std::string& error = "");
  // HTTP side: blocks until finish() ran.
  void wait();
  const std::vector<float>& vectors() const { return vectors_; }
  const std::string& error() const { return error_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::vector<float> vectors_;
  std::string error_;
};

}  // namespace fish::serve
