// Routing of a mixture-of-experts layer, per token: the router's logits
// [n_expert] go through a softmax (f32, max subtracted), the k most probable
// experts are chosen (equal probabilities: the lower expert index first), in
// order of decreasing probability, and weighted by their probability
// (normalise = false) or by their probability over the chosen ones' sum
// (normalise = true). Which architecture uses which: model/hparams.h MoeGating.
#pragma once
#include <cstdint>

namespace fish {

// logits [n_expert] -> ids [k], weights [k]. 1 <= k <= n_expert.
void moe_route(const float* logits, int32_t n_expert, int32_t k, bool normalise, int32_t* ids, float* weights);

}  // namespace fish
