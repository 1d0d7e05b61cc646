// Continuous batching over the model's sequences: see scheduler.h.
#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "cli_model.h"
#include "serve/logprobs.h"
#include "serve/text_stream.h"

namespace fish::serve {

struct Scheduler::Slot {
  int32_t seq = 0;
  std::shared_ptr<Job> job;  // null: free
  fish_sampler* sampler = nullptr;
  uint64_t order = 0;        // when the job started: prompt chunks go first come, first served
  int32_t n_past = 0;        // positions the sequence holds
  int32_t last = -1;         // the sampled token to evaluate next
  bool generating = false;   // the prompt is done; one decode row per step
  int32_t generated = 0;
  Usage usage;
  TextStream text;
  ~Slot() { fish_sampler_free(sampler); }
};

Scheduler::Scheduler(fish_model* m, const SchedulerOptions& opt, ServeCounters* counters)
    : m_(m), opt_(opt), counters_(counters) {
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m_, &info);
  n_vocab_ = info.n_vocab;
  n_ctx_ = info.n_ctx;
  for (int32_t v = 0; v < n_vocab_; ++v)
    if (fish_token_is_eog(m_, v)) eog_.push_back(v);
  n_embd_ = fish_n_embd(m_);
  int32_t n_gen = fish_n_seq(m_);
  if (opt_.embeddings && n_gen > opt_.embed_seqs) {  // the last sequences: embeddings only
    embed_seqs_ = std::max(opt_.embed_seqs, 1);
    n_gen -= embed_seqs_;
    embed_seq_ = n_gen;
  }
  opt_.batch_rows = std::max(opt_.batch_rows, n_gen);  // every slot decodes in each step
  for (int32_t i = 0; i < n_gen; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->seq = i;
  }
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  abort_all("the server is stopping");
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Scheduler::Submit Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (draining_) return Submit::kDraining;
    // Free slots take jobs at the next step: count those as room too.
    int32_t busy = counters_->running.load();
    const int32_t free_slots = std::max(0, n_slots() - busy);
    if (int32_t(queue_.size()) >= opt_.max_queue + free_slots) {
      ++counters_->rejected_full;
      return Submit::kQueueFull;
    }
    queue_.push_back(job);
    counters_->queued = int32_t(queue_.size());
  }
  cv_.notify_all();
  return Submit::kOk;
}

Scheduler::Submit Scheduler::submit_embed(const std::shared_ptr<EmbedJob>& job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (draining_ || embed_seq_ < 0) return Submit::kDraining;
    if (int32_t(embed_queue_.size()) >= std::max(1, opt_.max_queue)) {
      ++counters_->rejected_full;
      return Submit::kQueueFull;
    }
    embed_queue_.push_back(job);
  }
  cv_.notify_all();
  return Submit::kOk;
}

bool Scheduler::embed_together(const std::vector<std::shared_ptr<EmbedJob>>& jobs) {
  std::vector<const int32_t*> ptr;
  std::vector<int32_t> len;
  int64_t n_tok = 0;
  for (const auto& j : jobs)
    for (const auto& in : j->inputs) {
      ptr.push_back(in.data());
      len.push_back(int32_t(in.size()));
      n_tok += int64_t(in.size());
    }
  fish_embed_params p = jobs.front()->params;
  p.seq = embed_seq_;
  p.n_seq = embed_seqs_;
  std::vector<float> out(ptr.size() * size_t(n_embd_));
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = fish_embed_tokens(m_, ptr.data(), len.data(), int32_t(ptr.size()), &p, out.data());
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  counters_->prompt_us += us;
  if (rc != 0) return false;
  counters_->prompt_tokens += n_tok;  // once, though a failed group's jobs run again alone
  size_t at = 0;
  for (const auto& j : jobs) {
    const size_t n = j->inputs.size() * size_t(n_embd_);
    ++counters_->jobs_finished;
    j->finish(std::vector<float>(out.begin() + long(at), out.begin() + long(at + n)));
    at += n;
  }
  return true;
}

bool Scheduler::run_embeddings() {
  std::deque<std::shared_ptr<EmbedJob>> jobs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    jobs.swap(embed_queue_);
    embedding_ += int32_t(jobs.size());
  }
  // The waiting jobs of the same pooling and normalisation (every request's,
  // today) go in one call: their inputs share forwards as a request's do.
  std::vector<bool> done(jobs.size(), false);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (done[i]) continue;
    std::vector<std::shared_ptr<EmbedJob>> group;
    for (size_t k = i; k < jobs.size(); ++k)
      if (!done[k] && jobs[k]->params.pooling == jobs[i]->params.pooling &&
          jobs[k]->params.normalize == jobs[i]->params.normalize) {
        group.push_back(jobs[k]);
        done[k] = true;
      }
    if (embed_together(group)) continue;
    // A failure fails only its own request: each job again alone.
    for (const auto& j : group) {
      if (group.size() > 1 && embed_together({j})) continue;
      ++counters_->jobs_failed;
      j->finish({}, std::string("embeddings failed: ") + fish_last_error(m_));
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    embedding_ -= int32_t(jobs.size());
  }
  return !jobs.empty();
}

void Scheduler::cancel(const std::shared_ptr<Job>& job) {
  job->cancelled = true;
  cv_.notify_all();
}

void Scheduler::drain() {
  std::lock_guard<std::mutex> lk(mu_);
  draining_ = true;
}

bool Scheduler::draining() const {
  std::lock_guard<std::mutex> lk(mu_);
  return draining_;
}

bool Scheduler::idle() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.empty() && embed_queue_.empty() && embedding_ == 0 && counters_->running.load() == 0;
}

void Scheduler::abort_all(const std::string& why) {
  std::deque<std::shared_ptr<Job>> dropped;
  std::deque<std::shared_ptr<EmbedJob>> embeds;
  {
    std::lock_guard<std::mutex> lk(mu_);
    draining_ = true;
    if (abort_why_.empty()) abort_why_ = why;
    dropped.swap(queue_);
    embeds.swap(embed_queue_);
    counters_->queued = 0;
  }
  for (auto& j : dropped) j->finish("", Usage{}, why);
  for (auto& j : embeds) j->finish({}, why);
  cv_.notify_all();
}

void Scheduler::run() {
  for (;;) {
    if (step()) continue;
    std::unique_lock<std::mutex> lk(mu_);
    if (stop_) return;
    cv_.wait(lk, [&] { return stop_ || !queue_.empty() || !embed_queue_.empty() || !abort_why_.empty(); });
    if (stop_ && queue_.empty() && embed_queue_.empty()) return;
  }
}

void Scheduler::finish(Slot& s, const std::string& reason, const std::string& error) {
  if (error.empty()) {
    std::string rest = s.text.flush();
    if (!rest.empty()) s.job->push(Delta{std::move(rest), {}});
  }
  s.usage.completion_tokens = s.generated;
  s.job->finish(reason, s.usage, error);
  // The positions stay in the prefix cache for a later prompt that shares
  // them; released after the step's rows are sampled (logits stay valid).
  releasing_.push_back(s.seq);
  if (!error.empty()) ++(s.job->cancelled ? counters_->jobs_cancelled : counters_->jobs_failed);
  else ++counters_->jobs_finished;
  fish_sampler_free(s.sampler);
  s.sampler = nullptr;
  s.job.reset();
  --counters_->running;
}

void Scheduler::release_finished() {
  for (int32_t seq : releasing_)
    if (fish_seq_release(m_, seq) != 0) fish_seq_truncate(m_, seq, 0);
  releasing_.clear();
}

void Scheduler::start_jobs() {
  std::vector<std::shared_ptr<Job>> starting, cancelled;
  std::string abort_why;
  {
    std::lock_guard<std::mutex> lk(mu_);
    abort_why = abort_why_;
    for (auto it = queue_.begin(); it != queue_.end();)
      if ((*it)->cancelled) {
        cancelled.push_back(*it);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    for (auto& s : slots_)
      if (!s->job && !queue_.empty()) {
        s->job = queue_.front();
        queue_.pop_front();
        ++counters_->running;
        starting.push_back(s->job);
      }
    counters_->queued = int32_t(queue_.size());
  }
  for (auto& j : cancelled) {
    j->finish("", Usage{}, "cancelled");
    ++counters_->jobs_cancelled;
  }
  for (auto& s : slots_) {
    if (!s->job || !s->job->cancelled) continue;
    finish(*s, "", "cancelled");
  }
  release_finished();  // before a new job looks for its prefix
  for (auto& s : slots_) {
    if (!s->job) continue;
    if (!abort_why.empty()) {
      finish(*s, "", abort_why);
      continue;
    }
    if (std::find(starting.begin(), starting.end(), s->job) == starting.end()) continue;
    // A new job: the longest prefix of its prompt some sequence holds is kept.
    Job& j = *s->job;
    ++counters_->jobs_started;
    s->order = ++order_;
    s->generating = false;
    s->generated = 0;
    s->text = TextStream(j.params.stop);
    s->usage = Usage{};
    s->usage.prompt_tokens = int32_t(j.prompt.size());
    if (j.prompt.empty() || int32_t(j.prompt.size()) >= n_ctx_) {
      finish(*s, "", "the prompt does not fit the context");
      continue;
    }
    const int32_t reused = fish_seq_reuse(m_, s->seq, j.prompt.data(), int32_t(j.prompt.size()));
    if (reused < 0) {
      finish(*s, "", std::string("fish_seq_reuse: ") + fish_last_error(m_));
      continue;
    }
    s->n_past = reused;
    s->usage.cached_tokens = reused;
    counters_->cached_tokens += reused;
    s->sampler = fish_sampler_new(&j.params.sampler);
    if (!s->sampler) {
      finish(*s, "", "invalid sampling parameters");
      continue;
    }
    if (j.params.constrained()) {
      // The schema was checked when the request was read (a 400 then); this
      // compiles it again for the sampler.
      fish_error* err = nullptr;
      const bool schema = !j.params.json_schema.empty();
      if ((schema ? fish_sampler_constrain_json_schema(s->sampler, m_, j.params.json_schema.c_str(), &err)
                  : fish_sampler_constrain_json(s->sampler, m_, &err)) != 0) {
        finish(*s, "", std::string(schema ? "JSON schema: " : "JSON mode: ") + fish_error_message(err));
        fish_error_free(err);
        continue;
      }
    }
    for (int32_t t : j.prompt) fish_sampler_accept(s->sampler, t);
    if (j.params.max_tokens == 0) finish(*s, "length");
  }
  release_finished();
}

void Scheduler::sample_row(Slot& s, int32_t row) {
  const Job& j = *s.job;
  const float* logits = fish_get_logits_ith(m_, row);
  if (!logits) return finish(s, "", "no logits for the row");
  std::vector<float> masked;
  // JSON mode and a schema end the text where the value is complete, whatever ignore_eos says.
  const bool ignore_eos = j.params.ignore_eos && !j.params.constrained();
  if (ignore_eos || !j.params.logit_bias.empty()) {
    masked.assign(logits, logits + n_vocab_);
    for (const auto& [id, bias] : j.params.logit_bias)  // -100 bans the token, as OpenAI says
      masked[size_t(id)] = bias <= -100 ? -std::numeric_limits<float>::infinity() : masked[size_t(id)] + bias;
    if (ignore_eos)
      for (int32_t v : eog_) masked[size_t(v)] = -std::numeric_limits<float>::infinity();
  }
  const int32_t tok = fish_sampler_sample(s.sampler, masked.empty() ? logits : masked.data(), n_vocab_);
  if (tok < 0 || tok >= n_vocab_) return finish(s, "", "sampling failed");
  s.generating = true;
  if (!ignore_eos && fish_token_is_eog(m_, tok)) return finish(s, "stop");
  fish_sampler_accept(s.sampler, tok);
  ++s.generated;
  ++counters_->generated_tokens;
  std::string p = fish::cli::piece(m_, tok);
  if (p.empty() && std::find(j.params.keep_special.begin(), j.params.keep_special.end(), tok) != j.params.keep_special.end()) {
    char buf[128];
    const int32_t n = fish_token_to_piece(m_, tok, buf, sizeof buf, 1);
    if (n > 0) p.assign(buf, size_t(n));
  }
  Delta d;
  d.text = s.text.push(p);
  if (j.params.top_logprobs >= 0)
    d.logprobs.push_back(token_logprob(logits, n_vocab_, tok, j.params.top_logprobs,
                                       [&](int32_t id) { return fish::cli::piece(m_, id); }));
  if (!d.text.empty() || !d.logprobs.empty()) s.job->push(std::move(d));
  if (s.text.stopped()) return finish(s, "stop");
  if (j.params.max_tokens >= 0 && s.generated >= j.params.max_tokens) return finish(s, "length");
  if (s.n_past >= n_ctx_) return finish(s, "length");  // no position left for this token
  s.last = tok;
}

bool Scheduler::step() {
  const bool embedded = run_embeddings();
  start_jobs();
  // Rows: every generating job's next token, then prompt chunks (oldest job first).
  std::vector<int32_t> tok, pos, seq;
  std::vector<int8_t> want;
  std::vector<Slot*> owner;  // per row
  for (auto& s : slots_)
    if (s->job && s->generating) {
      tok.push_back(s->last);
      pos.push_back(s->n_past);
      seq.push_back(s->seq);
      want.push_back(1);
      owner.push_back(s.get());
    }
  const size_t n_decode = tok.size();
  std::vector<Slot*> filling;
  for (auto& s : slots_)
    if (s->job && !s->generating) filling.push_back(s.get());
  std::sort(filling.begin(), filling.end(), [](const Slot* a, const Slot* b) { return a->order < b->order; });
  int32_t budget = opt_.batch_rows - int32_t(tok.size());
  for (Slot* s : filling) {
    if (budget <= 0) break;
    const auto& prompt = s->job->prompt;
    const int32_t left = int32_t(prompt.size()) - s->n_past;
    const int32_t chunk = std::min(left, budget);
    for (int32_t i = 0; i < chunk; ++i) {
      tok.push_back(prompt[size_t(s->n_past + i)]);
      pos.push_back(s->n_past + i);
      seq.push_back(s->seq);
      want.push_back(i == chunk - 1 && chunk == left ? 1 : 0);
      owner.push_back(s);
    }
    budget -= chunk;
  }
  if (tok.empty()) return embedded;

  fish_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = int32_t(tok.size());
  b.token = tok.data();
  b.pos = pos.data();
  b.seq_id = seq.data();
  b.logits = want.data();
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = fish_decode(m_, &b);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  ++counters_->steps;
  const size_t n_prompt = tok.size() - n_decode;
  counters_->prompt_tokens += int64_t(n_prompt);
  counters_->prompt_us += int64_t(double(us) * double(n_prompt) / double(tok.size()));
  counters_->gen_us += int64_t(double(us) * double(n_decode) / double(tok.size()));
  if (rc != 0) {
    const std::string why = std::string("evaluation failed: ") + fish_last_error(m_);
    for (size_t r = 0; r < owner.size(); ++r)
      if (owner[r]->job && (r + 1 == owner.size() || owner[r + 1] != owner[r])) finish(*owner[r], "", why);
    release_finished();
    return true;
  }
  for (size_t r = 0; r < owner.size(); ++r) ++owner[r]->n_past;
  for (size_t r = 0; r < owner.size(); ++r)
    if (want[r] && owner[r]->job) sample_row(*owner[r], int32_t(r));
  release_finished();
  counters_->kv_bytes = fish_kv_bytes(m_);
  counters_->prefix_cache_bytes = fish_prefix_cache_bytes(m_);
  return true;
}

}  // namespace fish::serve
