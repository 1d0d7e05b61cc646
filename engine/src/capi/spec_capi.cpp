// The speculative-decoding part of the C API (fish_spec.h): SpecDecoder over
// fish_model, through the model's own C calls on sequence 0.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "capi/capi_util.h"
#include "capi/sampler_internal.h"
#include "common/error.h"
#include "fish/fish_spec.h"
#include "spec/speculative.h"
#include "spec/vocab_match.h"

namespace {

// SpecModel over a fish_model: sequence 0 through fish_eval and friends.
class CapiModel final : public fish::spec::SpecModel {
 public:
  explicit CapiModel(fish_model* m) : m_(m) {
    fish_model_info info{};
    info.struct_size = sizeof info;
    fish_model_get_info(m, &info);
    n_vocab_ = info.n_vocab, n_ctx_ = info.n_ctx, bos_ = info.bos, eos_ = info.eos;
  }
  int32_t n_vocab() const override { return n_vocab_; }
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t kv_len() const override { return fish_kv_len(m_); }
  void eval(const int32_t* tokens, int32_t n, int32_t pos, bool all_logits) override {
    if (fish_eval(m_, tokens, n, pos, all_logits ? 1 : 0) != 0) throw fish::Error(fish_last_error(m_));
  }
  const float* logits(int32_t i) override {
    const float* l = fish_get_logits(m_, i);
    if (!l) throw fish::Error("speculative decoding: no logits for row " + std::to_string(i));
    return l;
  }
  void truncate(int32_t n) override {
    if (fish_kv_truncate(m_, n) != 0) throw fish::Error(fish_last_error(m_));
  }
  bool is_eog(int32_t token) const override { return fish_token_is_eog(m_, token) != 0; }
  std::string token_text(int32_t token) const override {
    char buf[128];
    const int32_t n = fish_token_to_piece(m_, token, buf, sizeof buf, 1);
    if (n >= 0) return std::string(buf, size_t(n));
    std::string s(size_t(-n), '\0');
    const int32_t m = fish_token_to_piece(m_, token, s.data(), int32_t(s.size()), 1);
    return s.substr(0, size_t(std::max(m, 0)));
  }
  int32_t bos() const override { return bos_; }
  int32_t eos() const override { return eos_; }

 private:
  fish_model* m_;
  int32_t n_vocab_ = 0, n_ctx_ = 0, bos_ = -1, eos_ = -1;
};

}  // namespace

struct fish_spec {
  std::unique_ptr<CapiModel> target, draft;
  std::unique_ptr<fish::spec::SpecDecoder> dec;
  std::vector<int32_t> out;
  std::string error;
};

namespace {

template <class Fn>
int spec_status(fish_spec* s, Fn&& fn) {
  fish_error* e = nullptr;
  if (fish::capi::guarded(&e, fn)) return 0;
  s->error = fish_error_message(e);
  fish_error_free(e);
  return 1;
}

}  // namespace

extern "C" {

FISH_API fish_spec_params fish_spec_default_params(void) {
  fish_spec_params p{};
  p.struct_size = sizeof p;
  const fish::spec::SpecParams d;
  p.draft = nullptr;
  p.n_draft = d.n_draft;
  p.ngram_min = d.ngram_min;
  p.ngram_max = d.ngram_max;
  p.draft_p_min = d.draft_p_min;
  return p;
}

FISH_API const char* fish_spec_vocab_check(const fish_model* target, const fish_model* draft) {
  static thread_local std::string why;
  if (!target || !draft) return "no model";
  const bool ok = fish::capi::fenced(false, [&] {
    // CapiModel takes a non-const model for eval; the check only reads.
    CapiModel t(const_cast<fish_model*>(target)), d(const_cast<fish_model*>(draft));
    why = fish::spec::vocab_mismatch(t, d);
    return true;
  });
  if (!ok) why = "the vocabularies could not be compared";
  return why.empty() ? nullptr : why.c_str();
}

FISH_API fish_spec* fish_spec_new(fish_model* target, const fish_spec_params* params,
                                  const fish_sampler_params* sampler, fish_error** err) {
  if (!target) {
    fish::capi::set_error(err, "fish_spec_new: no target model");
    return nullptr;
  }
  fish_spec_params p = fish_spec_default_params();
  if (params) std::memcpy(&p, params, std::min<size_t>(params->struct_size, sizeof p));
  if (const char* why = fish_sampler_params_check(sampler)) {
    fish::capi::set_error(err, std::string("fish_spec_new: sampler: ") + why);
    return nullptr;
  }
  const fish::SamplerParams s = fish::capi::sampler_params_from(sampler);
  fish::spec::SpecParams sparams;
  sparams.n_draft = p.n_draft;
  sparams.ngram_min = p.ngram_min;
  sparams.ngram_max = p.ngram_max;
  sparams.draft_p_min = p.draft_p_min;
  fish_spec* out = nullptr;
  fish::capi::guarded(err, [&] {
    auto h = std::make_unique<fish_spec>();
    h->target = std::make_unique<CapiModel>(target);
    if (p.draft) h->draft = std::make_unique<CapiModel>(p.draft);
    if (p.draft == target)
      throw fish::Error("the draft is the target's own fish_model; load the file a second time to draft with the same model");
    h->dec = std::make_unique<fish::spec::SpecDecoder>(*h->target, h->draft.get(), sparams, s);
    out = h.release();
  });
  return out;
}

FISH_API void fish_spec_free(fish_spec* s) { delete s; }

FISH_API const char* fish_spec_last_error(const fish_spec* s) { return s ? s->error.c_str() : "no fish_spec"; }

FISH_API int fish_spec_start(fish_spec* s, const int32_t* tokens, int32_t n) {
  if (!s) return 1;
  return spec_status(s, [&] { s->dec->start(tokens, n); });
}

FISH_API int32_t fish_spec_step(fish_spec* s, int32_t* out, int32_t cap) {
  if (!s) return -1;
  if (!out || cap < 1) {
    s->error = "fish_spec_step: needs room for at least one token";
    return -1;
  }
  if (spec_status(s, [&] { s->dec->step(cap, s->out); }) != 0) return -1;
  std::copy(s->out.begin(), s->out.end(), out);
  return int32_t(s->out.size());
}

FISH_API int32_t fish_spec_n_tokens(const fish_spec* s) { return s ? int32_t(s->dec->tokens().size()) : 0; }

FISH_API int fish_spec_shift(fish_spec* s, int32_t n_keep, int32_t n_discard) {
  if (!s) return 1;
  return spec_status(s, [&] { s->dec->shift(n_keep, n_discard); });
}

FISH_API void fish_spec_get_stats(const fish_spec* s, fish_spec_stats* out) {
  if (!s || !out) return;
  const fish::spec::SpecStats& st = s->dec->stats();
  fish_spec_stats r{};
  r.struct_size = sizeof r;
  r.steps = st.steps;
  r.proposed = st.proposed;
  r.accepted = st.accepted;
  r.generated = st.generated;
  r.draft_forwards = st.draft_forwards;
  r.draft_seconds = st.draft_seconds;
  r.verify_seconds = st.verify_seconds;
  std::memcpy(out, &r, std::min<size_t>(out->struct_size ? out->struct_size : sizeof r, sizeof r));
}

FISH_API void fish_spec_reset_stats(fish_spec* s) {
  if (s) s->dec->reset_stats();
}

}  // extern "C"
