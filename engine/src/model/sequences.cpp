// LlamaModel's sequences: lengths, truncation, prefix copies (shared KV
// pages, model/kv_cache.h) and the prefix cache: a released sequence's
// positions stay in memory, bounded and least recently used first out, so a
// later prompt starting with the same tokens reuses them instead of
// recomputing them (what a server needs for a long shared system prompt).
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/llama_model.h"

namespace fish {

int32_t LlamaModel::seq_len(int32_t seq) const {
  if (seq < 0 || seq >= kv_.n_seq()) throw Error("sequence " + std::to_string(seq) + " outside 0.." + std::to_string(kv_.n_seq() - 1));
  return kv_.len(seq);
}

void LlamaModel::seq_truncate(int32_t seq, int32_t n) {
  n = std::max(0, std::min(n, seq_len(seq)));
  own_logits();  // span_kv_truncate may invalidate a logits view
  // Every device's span (a span that fails falls back alone: its layers to the CPU).
  for (size_t k = 0; k < parts_.size(); ++k) {
    DevicePart& d = parts_[k];
    if (d.span && !d.be->span_kv_truncate(d.span, seq, n)) {
      fall_back_part(k, "span_kv_truncate", d.be->last_error());
      k = size_t(-1);  // parts_ changed: start over (the truncated spans truncate again: a no-op)
    }
  }
  kv_.truncate(seq, n);
  history_[size_t(seq)].resize(size_t(n));
}

void LlamaModel::seq_copy(int32_t src, int32_t dst, int32_t n) {
  n = std::max(0, std::min(n, seq_len(src)));
  seq_len(dst);  // range check
  if (src == dst) return seq_truncate(dst, n);
  seq_truncate(dst, 0);
  if (n == 0) return;
  // Every device's span copies; one that cannot (FISH_E_UNSUPPORTED) makes dst
  // compute the prefix itself, one that fails falls back alone.
  bool copied = true;
  for (size_t k = 0; k < parts_.size(); ++k) {
    DevicePart& d = parts_[k];
    if (!d.span || (d.be->has_span_kv_copy() && d.be->span_kv_copy(d.span, src, dst, 0, n))) continue;
    if (d.be->last_status() != ComputeBackend::kUnsupported && d.be->has_span_kv_copy()) {
      fall_back_part(k, "span_kv_copy", d.be->last_error());
      k = size_t(-1);  // parts_ changed: start over (copying again is harmless)
      continue;
    }
    copied = false;
  }
  if (!copied) {
    if (gpu_span()) {
      const std::vector<int32_t> toks(history_[size_t(src)].begin(), history_[size_t(src)].begin() + n);
      std::vector<int32_t> sq(static_cast<size_t>(n), dst), ps(static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) ps[size_t(i)] = i;
      std::vector<uint8_t> none(size_t(n), 0);
      eval_batch(toks.data(), sq.data(), ps.data(), none.data(), n);
      return;
    }
  }
  kv_.copy_prefix(src, dst, n);
  history_[size_t(dst)].assign(history_[size_t(src)].begin(), history_[size_t(src)].begin() + n);
}

void LlamaModel::seq_release(int32_t seq) {
  const int32_t n = seq_len(seq);
  // A span's device KV is not kept: only a model without one retains (its
  // live sequences still serve as prefixes through seq_reuse).
  if (gpu_span() || n == 0 || prefix_cache_limit_ == 0) return seq_truncate(seq, 0);
  own_logits();
  PrefixEntry e;
  e.tokens.assign(history_[size_t(seq)].begin(), history_[size_t(seq)].begin() + n);
  e.kv = kv_.retain(seq);
  e.last_use = ++prefix_clock_;
  history_[size_t(seq)].clear();
  prefix_cache_.push_back(std::move(e));
  trim_prefix_cache();
}

void LlamaModel::trim_prefix_cache() {
  // Least recently used first out, until the retained pages fit the bound.
  for (;;) {
    uint64_t bytes = 0;
    for (const PrefixEntry& e : prefix_cache_) bytes += uint64_t(kv_.retained_pages(e.kv)) * kv_.page_bytes();
    if (bytes <= prefix_cache_limit_ || prefix_cache_.empty()) return;
    auto oldest = std::min_element(prefix_cache_.begin(), prefix_cache_.end(),
                                   [](const PrefixEntry& a, const PrefixEntry& b) { return a.last_use < b.last_use; });
    kv_.drop_retained(oldest->kv);
    prefix_cache_.erase(oldest);
  }
}

uint64_t LlamaModel::prefix_cache_bytes() const {
  uint64_t bytes = 0;
  for (const PrefixEntry& e : prefix_cache_) bytes += uint64_t(kv_.retained_pages(e.kv)) * kv_.page_bytes();
  return bytes;
}

int32_t LlamaModel::seq_reuse(int32_t dst, const int32_t* tokens, int32_t n) {
  seq_len(dst);  // range check
  // At most n - 1 positions: the prompt's last token is evaluated for its logits.
  const int32_t cap = std::max(0, n - 1);
  auto common = [&](const std::vector<int32_t>& h, int32_t len) {
    int32_t k = 0;
    const int32_t m = std::min(cap, len);
    while (k < m && h[size_t(k)] == tokens[k]) ++k;
    return k;
  };
  int32_t best = common(history_[size_t(dst)], seq_len(dst)), from_seq = dst;
  PrefixEntry* from_entry = nullptr;
  for (int32_t s = 0; s < kv_.n_seq(); ++s) {
    if (s == dst) continue;
    const int32_t k = common(history_[size_t(s)], seq_len(s));
    if (k > best) best = k, from_seq = s, from_entry = nullptr;
  }
  if (!gpu_span())
    for (PrefixEntry& e : prefix_cache_) {
      const int32_t k = common(e.tokens, int32_t(e.tokens.size()));
      if (k > best) best = k, from_entry = &e;
    }
  if (from_entry) {
    own_logits();
    kv_.copy_retained(from_entry->kv, dst, best);
    history_[size_t(dst)].assign(from_entry->tokens.begin(), from_entry->tokens.begin() + best);
    from_entry->last_use = ++prefix_clock_;
  } else if (from_seq != dst) {
    seq_copy(from_seq, dst, best);
  } else {
    seq_truncate(dst, best);
  }
  ++prefix_stats_.lookups;
  prefix_stats_.reused_tokens += best;
  if (best > 0) ++prefix_stats_.hits;
  return best;
}

}  // namespace fish
