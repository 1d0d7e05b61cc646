// The C API's sampler as the engine's: its parameters (fields past the
// caller's struct_size, from a caller built against an older fish.h, keep
// their defaults; fish_sampler_new and fish_spec_new share the conversion)
// and the engine sampler behind a handle (fish_sampler_constrain_json, in
// model_capi.cpp, reaches it with the model's vocabulary). sampler_capi.cpp.
#pragma once
#include "fish/fish.h"
#include "model/sampling.h"

namespace fish::capi {

SamplerParams sampler_params_from(const fish_sampler_params* p);
Sampler& sampler_of(fish_sampler* s);

}  // namespace fish::capi
