#include "spec/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "common/error.h"
#include "spec/ngram_lookup.h"
#include "spec/vocab_match.h"

namespace fish::spec {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Softmax probability of `tok` under raw logits: the draft's confidence.
float raw_prob(const float* logits, int32_t n, int32_t tok) {
  float mx = logits[0];
  for (int32_t i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(double(logits[i] - mx));
  return float(std::exp(double(logits[tok] - mx)) / sum);
}

}  // namespace

SpecDecoder::SpecDecoder(SpecModel& target, SpecModel* draft, const SpecParams& params, const SamplerParams& sampling)
    : target_(target), draft_(draft), params_(params), sampling_(sampling), sampler_(sampling), rule_(sampling.seed) {
  if (params.n_draft < 1) throw Error("speculative decoding: n_draft must be >= 1 (it is " + std::to_string(params.n_draft) + ")");
  if (!draft && (params.ngram_min < 1 || params.ngram_max < params.ngram_min || params.ngram_max > 64))
    throw Error("speculative decoding: n-gram lengths " + std::to_string(params.ngram_min) + ".." +
                std::to_string(params.ngram_max) + ": expected 1 <= min <= max <= 64");
  if (!(params.draft_p_min >= 0 && params.draft_p_min <= 1))
    throw Error("speculative decoding: draft_p_min must be in [0, 1]");
  if (draft == &target)
    throw Error("speculative decoding: the draft is the target itself; load the model a second time to use it as its own draft");
  if (draft) {
    const std::string why = vocab_mismatch(target, *draft);
    if (!why.empty()) throw Error("the draft model's vocabulary is not the target's: " + why);
  }
}

void SpecDecoder::sync(SpecModel& m, std::vector<int32_t>& kv, int32_t upto, bool need_logits) {
  const char* who = &m == &target_ ? "target" : "draft";
  if (m.kv_len() != int32_t(kv.size()))
    throw Error(std::string("speculative decoding: sequence 0 of the ") + who + " changed outside it (it holds " +
                std::to_string(m.kv_len()) + " positions, " + std::to_string(kv.size()) + " expected)");
  const int32_t limit = std::min<int32_t>(int32_t(kv.size()), upto);
  int32_t c = 0;
  while (c < limit && kv[size_t(c)] == ctx_[size_t(c)]) ++c;
  if (need_logits) c = std::min(c, upto - 1);
  if (int32_t(kv.size()) > c) {
    m.truncate(c);
    kv.resize(size_t(c));
  }
  if (upto > c) {
    m.eval(ctx_.data() + c, upto - c, c, false);
    kv.insert(kv.end(), ctx_.begin() + c, ctx_.begin() + upto);
    if (&m == draft_) ++stats_.draft_forwards;
  }
}

void SpecDecoder::start(const int32_t* tokens, int32_t n) {
  if (!tokens || n < 1) throw Error("speculative decoding: a context needs at least one token");
  if (n > target_.n_ctx())
    throw Error("speculative decoding: " + std::to_string(n) + " tokens do not fit the context (" +
                std::to_string(target_.n_ctx()) + ")");
  for (int32_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= target_.n_vocab())
      throw Error("speculative decoding: token " + std::to_string(tokens[i]) + " at " + std::to_string(i) +
                  " is outside the vocabulary (" + std::to_string(target_.n_vocab()) + ")");
  ctx_.assign(tokens, tokens + n);
  sampler_ = Sampler(sampling_);
  for (int32_t t : ctx_) sampler_.accept(t);
  // A model evaluated elsewhere since: what it holds is unknown, start it afresh.
  if (target_.kv_len() != int32_t(target_kv_.size())) {
    target_.truncate(0);
    target_kv_.clear();
  }
  if (draft_ && draft_->kv_len() != int32_t(draft_kv_.size())) {
    draft_->truncate(0);
    draft_kv_.clear();
  }
  sync(target_, target_kv_, n - 1, false);
  // The draft too, so that its first proposal costs one forward, not the prompt.
  if (draft_ && n - 1 <= draft_->n_ctx()) sync(*draft_, draft_kv_, n - 1, false);
}

void SpecDecoder::shift(int32_t n_keep, int32_t n_discard) {
  const int32_t n = int32_t(ctx_.size());
  if (n_keep < 0 || n_discard < 1 || int64_t(n_keep) + n_discard > n - 1)
    throw Error("speculative decoding: cannot drop " + std::to_string(n_discard) + " tokens after " +
                std::to_string(n_keep) + " of a " + std::to_string(n) + "-token context (its last token stays)");
  ctx_.erase(ctx_.begin() + n_keep, ctx_.begin() + n_keep + n_discard);
  const int32_t m = int32_t(ctx_.size()) - 1;
  sync(target_, target_kv_, m, false);
  if (draft_ && m <= draft_->n_ctx()) sync(*draft_, draft_kv_, m, false);
}

void SpecDecoder::propose(int32_t max_k, std::vector<int32_t>& d) {
  d.clear();
  const int32_t n = int32_t(ctx_.size());
  if (!draft_) {
    ngram_propose(ctx_.data(), n, params_.ngram_min, params_.ngram_max, max_k, d);
    for (size_t i = 0; i < d.size(); ++i)
      if (target_.is_eog(d[i])) {
        d.resize(i + 1);  // nothing follows the end of the text
        break;
      }
    return;
  }
  // The draft evaluates positions up to n + k - 2 (its last proposal is not evaluated).
  max_k = int32_t(std::min<int64_t>(max_k, int64_t(draft_->n_ctx()) - n + 1));
  if (max_k <= 0) return;
  sync(*draft_, draft_kv_, n, true);
  Sampler ds(sampling_);  // the target's settings and recent tokens (its random draws are rule_'s)
  if (sampling_.repeat_last_n > 0)
    for (int32_t i = std::max(0, n - sampling_.repeat_last_n); i < n; ++i) ds.accept(ctx_[size_t(i)]);
  if (!greedy() && int32_t(q_.size()) < max_k) q_.resize(size_t(max_k));
  const int32_t nv = draft_->n_vocab();
  for (int32_t j = 0; j < max_k; ++j) {
    if (j > 0) {
      draft_->eval(&d[size_t(j - 1)], 1, n + j - 1, false);
      draft_kv_.push_back(d[size_t(j - 1)]);
      ++stats_.draft_forwards;
    }
    const float* row = draft_->logits(-1);
    int32_t t;
    if (greedy()) {
      t = ds.sample(row, nv);
      if (params_.draft_p_min > 0 && raw_prob(row, nv, t) < params_.draft_p_min) break;
    } else {
      ds.distribution(row, nv, q_[size_t(j)]);
      // Decided before the draw, from q alone: the rule stays exact.
      if (q_[size_t(j)][0].p < params_.draft_p_min) break;
      t = rule_.draw(q_[size_t(j)]);
    }
    ds.accept(t);
    d.push_back(t);
    if (draft_->is_eog(t)) break;
  }
}

void SpecDecoder::step(int32_t max_out, std::vector<int32_t>& out) {
  out.clear();
  const int32_t n = int32_t(ctx_.size());
  if (n == 0) throw Error("speculative decoding: no context (start one first)");
  if (max_out < 1) throw Error("speculative decoding: a step needs room for at least one token");
  if (n > target_.n_ctx())
    throw Error("speculative decoding: the context is full (" + std::to_string(n) + " tokens, n_ctx " +
                std::to_string(target_.n_ctx()) + "); shift it first");
  const int32_t max_k = std::min({params_.n_draft, max_out - 1, target_.n_ctx() - n});
  auto t0 = std::chrono::steady_clock::now();
  d_.clear();
  if (max_k > 0) propose(max_k, d_);
  stats_.draft_seconds += seconds_since(t0);

  // Verify: [pending token, d1..dk] in one forward; row i is the target's view after d_i.
  t0 = std::chrono::steady_clock::now();
  sync(target_, target_kv_, n - 1, false);
  const int32_t k = int32_t(d_.size());
  batch_.assign(1, ctx_.back());
  batch_.insert(batch_.end(), d_.begin(), d_.end());
  target_.eval(batch_.data(), k + 1, n - 1, k > 0);
  target_kv_.insert(target_kv_.end(), batch_.begin(), batch_.end());
  const int32_t nv = target_.n_vocab();
  int32_t a = 0;  // proposals kept
  for (int32_t i = 0; i <= k; ++i) {
    const float* row = target_.logits(i == k ? -1 : i);
    int32_t c;
    if (greedy()) {
      c = sampler_.sample(row, nv);  // no random number drawn: plain decoding's choice
    } else {
      sampler_.distribution(row, nv, p_);
      bool drawn_kept = false;  // the same as c == d_i below
      c = i < k ? rule_.accept(p_, draft_ ? &q_[size_t(i)] : nullptr, d_[size_t(i)], &drawn_kept) : rule_.draw(p_);
    }
    sampler_.accept(c);
    out.push_back(c);
    const bool kept = i < k && c == d_[size_t(i)];
    if (kept) ++a;
    if (!kept || target_.is_eog(c)) break;
  }
  // Rejected proposals leave both models: the target keeps the context plus the kept ones.
  if (int32_t(target_kv_.size()) > n + a) {
    target_.truncate(n + a);
    target_kv_.resize(size_t(n + a));
  }
  ctx_.insert(ctx_.end(), out.begin(), out.end());
  if (draft_) {
    int32_t c = 0;
    const int32_t limit = std::min<int32_t>(int32_t(draft_kv_.size()), int32_t(ctx_.size()));
    while (c < limit && draft_kv_[size_t(c)] == ctx_[size_t(c)]) ++c;
    if (int32_t(draft_kv_.size()) > c && draft_->kv_len() == int32_t(draft_kv_.size())) {
      draft_->truncate(c);
      draft_kv_.resize(size_t(c));
    }
  }
  stats_.verify_seconds += seconds_since(t0);
  ++stats_.steps;
  stats_.proposed += k;
  stats_.accepted += a;
  stats_.generated += int64_t(out.size());
}

}  // namespace fish::spec
