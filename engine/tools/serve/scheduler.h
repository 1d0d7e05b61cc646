// fish serve's scheduler: one thread owns the model and runs continuous
// batching over its sequences (one per slot, fish_model_params.n_seq). Each
// step is one fish_decode holding the next token of every generating job and
// chunks of the prompts of jobs that just started (up to batch_rows rows in
// all, decode rows first), so a new request joins the running ones without
// waiting for them. A job starts from the longest prefix of its prompt that a
// live or released sequence holds (fish_seq_reuse) and its sequence is
// released into the prefix cache when it ends (fish_seq_release).
// Embeddings (SchedulerOptions::embeddings): the model's last embed_seqs
// sequences are no generation slots; each step first evaluates the embedding
// jobs waiting, the inputs of all of them in one fish_embed_tokens call packed
// over those sequences (several inputs per forward, the weights read once for
// them), so they never touch a generating job's KV (which waits for them).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fish/fish.h"
#include "serve/job.h"
#include "serve/serve_counters.h"

namespace fish::serve {

struct SchedulerOptions {
  int32_t batch_rows = 512;  // rows of one step (decode rows + prompt chunks)
  int32_t max_queue = 64;    // jobs waiting for a slot; more are refused
  bool embeddings = false;   // the model's last embed_seqs sequences serve embedding jobs (submit_embed)
  int32_t embed_seqs = 1;    // embedding inputs evaluated together (fish_embed_params.n_seq)
};

class Scheduler {
 public:
  // m: loaded with n_seq slots; used by the scheduler's thread alone from now
  // on, until the Scheduler is destroyed.
  Scheduler(fish_model* m, const SchedulerOptions& opt, ServeCounters* counters);
  ~Scheduler();  // aborts what still runs, joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Submit { kOk, kQueueFull, kDraining };
  Submit submit(const std::shared_ptr<Job>& job);
  // An embedding job (needs SchedulerOptions::embeddings); kQueueFull past max_queue waiting.
  Submit submit_embed(const std::shared_ptr<EmbedJob>& job);
  // The job's client went away: its sequence is freed at the next step.
  void cancel(const std::shared_ptr<Job>& job);
  // Refuses new jobs from now on (SIGTERM); those accepted go on.
  void drain();
  bool draining() const;
  // True when no job runs or waits.
  bool idle() const;
  // Ends every job with an error and refuses new ones (a second SIGTERM).
  void abort_all(const std::string& why);

  int32_t n_slots() const { return int32_t(slots_.size()); }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_embd() const { return n_embd_; }
  bool embeddings() const { return embed_seq_ >= 0; }

 private:
  struct Slot;
  void run();
  void start_jobs();
  bool step();
  void finish(Slot& s, const std::string& reason, const std::string& error = "");
  void sample_row(Slot& s, int32_t row);
  void release_finished();
  bool run_embeddings();  // the embedding jobs waiting; true when there were any
  // Jobs of the same parameters in one call; false (nothing finished) when it failed.
  bool embed_together(const std::vector<std::shared_ptr<EmbedJob>>& jobs);

  fish_model* m_;
  SchedulerOptions opt_;
  ServeCounters* counters_;
  int32_t n_vocab_ = 0, n_ctx_ = 0, n_embd_ = 0;
  int32_t embed_seq_ = -1;  // the first sequence embedding jobs run on (-1: none)
  int32_t embed_seqs_ = 0;  // sequences from embed_seq_ kept for them
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<int32_t> eog_;        // end-of-generation tokens (ignore_eos masks them)
  std::vector<int32_t> releasing_;  // sequences of jobs that ended this step
  uint64_t order_ = 0;

  mutable std::mutex mu_;  // queue_, draining_, stop_, abort_why_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::shared_ptr<EmbedJob>> embed_queue_;
  int32_t embedding_ = 0;  // embedding jobs taken from embed_queue_ and not finished
  bool draining_ = false, stop_ = false;
  std::string abort_why_;
  std::thread thread_;
};

}  // namespace fish::serve
