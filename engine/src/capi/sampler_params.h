// The C API's sampler parameters as the engine's: fields past the caller's
// struct_size (a caller built against an older fish.h) keep their defaults.
// fish_sampler_new and fish_spec_new share it (sampler_capi.cpp).
#pragma once
#include "fish/fish.h"
#include "model/sampling.h"

namespace fish::capi {

SamplerParams sampler_params_from(const fish_sampler_params* p);

}  // namespace fish::capi
