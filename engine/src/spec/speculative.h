// Speculative decoding: a cheap draft proposes up to n_draft tokens, the
// target evaluates its pending token and the proposals in ONE forward (every
// row's logits) and keeps the longest prefix its own sampler agrees with, plus
// its own next token; rejected positions are truncated in both models.
//
// The context (prompt + output, tokens()) ends with a token the target has not
// evaluated yet: each step evaluates [that token, d1..dk] at its position, so
// row i gives the target's choice after d1..di. With k = 0 a step is plain
// decoding (one token, one forward). A step yields a + 1 tokens for a accepted.
//
// Greedy (temp 0): the target's sampler picks each row's token exactly as
// plain decoding would; with the CPU's batch-invariant logits the text is
// identical to fish_eval one token at a time. temp > 0: speculative sampling's
// rule (spec_accept.h), so the text has the target sampler's distribution, but
// the random draws differ from plain sampling with the same seed.
//
// Drafts: a second model of the same vocabulary (its own KV, kept in step with
// the context: before drafting it evaluates what it lacks), greedy or
// sampled with the target's sampler settings; or, with no draft model, n-gram
// lookup in the context (ngram_lookup.h).
#pragma once
#include <cstdint>
#include <vector>

#include "model/sampling.h"
#include "spec/spec_accept.h"
#include "spec/spec_model.h"

namespace fish::spec {

struct SpecParams {
  int32_t n_draft = 8;     // proposals per step at most (>= 1)
  int32_t ngram_min = 1;   // lookup: n-gram lengths tried, longest first
  int32_t ngram_max = 3;
  float draft_p_min = 0;   // draft model: stop proposing at a token it gives less probability than this
};

struct SpecStats {
  int64_t steps = 0;      // target forwards
  int64_t proposed = 0;   // draft tokens offered for verification
  int64_t accepted = 0;   // of those, kept
  int64_t generated = 0;  // tokens yielded (accepted + one per step)
  int64_t draft_forwards = 0;
  double draft_seconds = 0;   // drafting (draft model forwards or lookup)
  double verify_seconds = 0;  // the target's forwards
};

class SpecDecoder {
 public:
  // draft null: n-gram lookup. The models must outlive the decoder, and their
  // sequence 0 is the decoder's while it is in use. Throws fish::Error on bad
  // parameters.
  SpecDecoder(SpecModel& target, SpecModel* draft, const SpecParams& params, const SamplerParams& sampling);

  // Starts a context (1 <= n <= the target's n_ctx): the sampler starts afresh
  // and remembers these tokens; the target (and the draft model) evaluate all
  // but the last. KV positions that already hold the same tokens are kept.
  void start(const int32_t* tokens, int32_t n);
  // Drops context tokens [n_keep, n_keep + n_discard) (a context shift: the
  // last token stays) and re-evaluates those after them at their new positions.
  void shift(int32_t n_keep, int32_t n_discard);
  // One step: 1..max_out tokens into out (cleared first); they are appended to
  // the context. Needs tokens().size() <= the target's n_ctx (else shift()).
  void step(int32_t max_out, std::vector<int32_t>& out);

  const std::vector<int32_t>& tokens() const { return ctx_; }
  const SpecStats& stats() const { return stats_; }
  void reset_stats() { stats_ = SpecStats{}; }
  bool greedy() const { return sampling_.temp <= 0; }

 private:
  // Makes m's KV hold ctx_[0, upto), keeping the positions that already agree
  // (kv: the tokens m holds, as the decoder left them). At least one token is
  // evaluated when `need_logits` (its logits are then m.logits(-1)).
  void sync(SpecModel& m, std::vector<int32_t>& kv, int32_t upto, bool need_logits);
  // Up to max_k proposals into d (and their distributions into q_ when sampled from the draft).
  void propose(int32_t max_k, std::vector<int32_t>& d);

  SpecModel& target_;
  SpecModel* draft_;
  SpecParams params_;
  SamplerParams sampling_;
  Sampler sampler_;   // the target's: remembers the context for the repetition penalty
  SpecSampling rule_;
  std::vector<int32_t> ctx_;                 // prompt + output; the last not evaluated by the target
  std::vector<int32_t> target_kv_, draft_kv_;  // what each model's sequence 0 holds
  std::vector<int32_t> d_;                   // this step's proposals
  std::vector<std::vector<TokenProb>> q_;    // their draft distributions (sampling with a draft model)
  std::vector<TokenProb> p_;
  std::vector<int32_t> batch_;
  SpecStats stats_;
};

}  // namespace fish::spec
