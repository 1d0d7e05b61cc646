// The sampling part of the C API.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "capi/capi_util.h"
#include "capi/sampler_internal.h"
#include "model/sampling.h"

struct fish_sampler {
  fish::Sampler s;
};

namespace fish::capi {

SamplerParams sampler_params_from(const fish_sampler_params* params) {
  fish_sampler_params p = fish_sampler_default_params();
  if (params) std::memcpy(&p, params, std::min<size_t>(params->struct_size, sizeof p));
  SamplerParams sp;
  sp.temp = p.temp;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.min_p = p.min_p;
  sp.repeat_penalty = p.repeat_penalty;
  sp.repeat_last_n = p.repeat_last_n;
  sp.seed = p.seed;
  sp.presence_penalty = p.presence_penalty;
  sp.frequency_penalty = p.frequency_penalty;
  return sp;
}

Sampler& sampler_of(fish_sampler* s) { return s->s; }

}  // namespace fish::capi

extern "C" {

FISH_API fish_sampler_params fish_sampler_default_params(void) {
  fish_sampler_params p{};
  p.struct_size = sizeof p;
  fish::SamplerParams d;
  p.temp = d.temp;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repeat_penalty = d.repeat_penalty;
  p.repeat_last_n = d.repeat_last_n;
  p.seed = d.seed;
  p.presence_penalty = d.presence_penalty;
  p.frequency_penalty = d.frequency_penalty;
  return p;
}

FISH_API const char* fish_sampler_params_check(const fish_sampler_params* params) {
  static thread_local std::string why;
  if (!params) return nullptr;
  fish_sampler_params p = fish_sampler_default_params();
  std::memcpy(&p, params, std::min<size_t>(params->struct_size, sizeof p));
  auto bad = [&](const char* name, double v, const char* expected) {
    why = std::string(name) + " = " + std::to_string(v) + ": expected " + expected;
    return why.c_str();
  };
  if (!std::isfinite(p.temp) || p.temp < 0) return bad("temp", p.temp, "a number >= 0");
  if (!std::isfinite(p.top_p) || p.top_p < 0 || p.top_p > 1) return bad("top_p", p.top_p, "a number in [0, 1]");
  if (!std::isfinite(p.min_p) || p.min_p < 0 || p.min_p > 1) return bad("min_p", p.min_p, "a number in [0, 1]");
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0)
    return bad("repeat_penalty", p.repeat_penalty, "a number > 0 (1: off)");
  if (p.repeat_last_n < -1) return bad("repeat_last_n", p.repeat_last_n, "an integer >= -1");
  if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2)
    return bad("presence_penalty", p.presence_penalty, "a number in [-2, 2] (0: off)");
  if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2)
    return bad("frequency_penalty", p.frequency_penalty, "a number in [-2, 2] (0: off)");
  return nullptr;
}

FISH_API fish_sampler* fish_sampler_new(const fish_sampler_params* params) {
  if (fish_sampler_params_check(params)) return nullptr;
  const fish::SamplerParams sp = fish::capi::sampler_params_from(params);
  return fish::capi::fenced(static_cast<fish_sampler*>(nullptr), [&] { return new fish_sampler{fish::Sampler(sp)}; });
}

FISH_API int32_t fish_sampler_sample(fish_sampler* s, const float* logits, int32_t n_vocab) {
  if (!s || !logits || n_vocab <= 0) return -1;
  return fish::capi::fenced(int32_t(-1), [&] { return s->s.sample(logits, n_vocab); });
}

FISH_API void fish_sampler_accept(fish_sampler* s, int32_t token) {
  if (s) fish::capi::fenced_void([&] { s->s.accept(token); });
}

FISH_API void fish_sampler_free(fish_sampler* s) { delete s; }

}  // extern "C"
