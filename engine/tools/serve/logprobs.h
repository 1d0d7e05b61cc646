// Log-probabilities of a sampled token for the OpenAI "logprobs" fields: the
// model's distribution (log-softmax of the raw logits, before temperature and
// truncation), the chosen token's value and the n likeliest tokens.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "serve/job.h"

namespace fish::serve {

// logits: [n_vocab]; top_n: how many alternatives (0..n_vocab); piece: a
// token's text.
TokenLogprob token_logprob(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n,
                           const std::function<std::string(int32_t)>& piece);

}  // namespace fish::serve
