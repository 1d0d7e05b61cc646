// A made-up model for the speculative decoder's tests: its logits are a fixed
// function of the last two tokens of its KV (so batching cannot change them),
// and it counts its forwards. `warp` bends the function: a draft with another
// warp proposes what the target only sometimes accepts.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "spec/spec_model.h"

namespace fish::test {

class FakeModel final : public fish::spec::SpecModel {
 public:
  FakeModel(int32_t n_vocab, int32_t n_ctx, float warp, float scale = 3.0f)
      : n_vocab_(n_vocab), n_ctx_(n_ctx), warp_(warp), scale_(scale) {}
  int32_t n_vocab() const override { return n_vocab_; }
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t kv_len() const override { return int32_t(kv.size()); }
  void eval(const int32_t* tokens, int32_t n, int32_t pos, bool all_logits) override {
    if (n < 1 || pos < 0 || pos > kv_len() || pos + n > n_ctx_) throw fish::Error("fake: bad eval");
    kv.resize(size_t(pos));
    rows_.clear();
    for (int32_t i = 0; i < n; ++i) {
      if (tokens[i] < 0 || tokens[i] >= n_vocab_) throw fish::Error("fake: bad token");
      kv.push_back(tokens[i]);
      if (all_logits || i == n - 1) rows_.push_back(next_logits(kv));
    }
    ++forwards;
    all_ = all_logits;
  }
  const float* logits(int32_t i) override {
    if (i < 0) return rows_.back().data();
    if (!all_ || size_t(i) >= rows_.size()) throw fish::Error("fake: no logits for that row");
    return rows_[size_t(i)].data();
  }
  void truncate(int32_t n) override {
    if (n < int32_t(kv.size())) kv.resize(size_t(n));
    rows_.clear();
  }
  bool is_eog(int32_t token) const override { return token == eog; }
  std::string token_text(int32_t token) const override { return text_prefix + std::to_string(token); }
  int32_t bos() const override { return 1; }
  int32_t eos() const override { return 2; }

  // The logits after `ctx` (what eval's last row gives for it).
  std::vector<float> next_logits(const std::vector<int32_t>& ctx) const {
    const int32_t a = ctx.empty() ? 0 : ctx.back(), b = ctx.size() > 1 ? ctx[ctx.size() - 2] : 0;
    std::vector<float> l(static_cast<size_t>(n_vocab_));
    for (int32_t v = 0; v < n_vocab_; ++v)
      l[size_t(v)] = scale_ * std::sin(1.7f * float(v) + 2.3f * float(a) + 0.9f * float(b) + 0.5f) +
                     warp_ * std::cos(3.1f * float(v) * float(a + 1) + float(b));
    return l;
  }

  std::vector<int32_t> kv;
  int64_t forwards = 0;
  int32_t eog = -1;
  std::string text_prefix = "t";

 private:
  int32_t n_vocab_, n_ctx_;
  float warp_, scale_;
  std::vector<std::vector<float>> rows_;
  bool all_ = false;
};

}  // namespace fish::test
