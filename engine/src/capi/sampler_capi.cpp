// The sampling part of the C API.
#include <cstring>

#include "capi/capi_util.h"
#include "model/sampling.h"

struct fish_sampler {
  fish::Sampler s;
};

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
  return p;
}

FISH_API fish_sampler* fish_sampler_new(const fish_sampler_params* params) {
  fish_sampler_params p = fish_sampler_default_params();
  if (params) std::memcpy(&p, params, std::min<size_t>(params->struct_size, sizeof p));
  fish::SamplerParams sp;
  sp.temp = p.temp;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.min_p = p.min_p;
  sp.repeat_penalty = p.repeat_penalty;
  sp.repeat_last_n = p.repeat_last_n;
  sp.seed = p.seed;
  return new fish_sampler{fish::Sampler(sp)};
}

FISH_API int32_t fish_sampler_sample(fish_sampler* s, const float* logits, int32_t n_vocab) {
  if (!s || !logits || n_vocab <= 0) return -1;
  return s->s.sample(logits, n_vocab);
}

FISH_API void fish_sampler_accept(fish_sampler* s, int32_t token) {
  if (s) s->s.accept(token);
}

FISH_API void fish_sampler_free(fish_sampler* s) { delete s; }

}  // extern "C"
