/* libfish public C API: speculative decoding (fish run --model-draft / --lookup).
 *
 * A draft proposes up to n_draft tokens: a second, smaller model of the same
 * vocabulary, or (no draft model) n-gram lookup, which proposes what followed
 * the last 3, 2 or 1 tokens the previous time they occurred in the context.
 * The target evaluates its pending token and the proposals in ONE forward
 * (every row's logits), keeps the longest prefix that its own sampler agrees
 * with, plus its own next token, and truncates the rejected positions in both
 * models. Each step yields 1 .. n_draft + 1 tokens for one target forward.
 *
 * temp 0 (greedy): the tokens are exactly those of plain decoding (fish_eval
 * one token at a time and fish_sampler_sample; the CPU's logits do not depend
 * on how many tokens a forward takes; on a GPU a near tie may resolve
 * differently when the verify forward takes another kernel).
 * temp > 0: speculative sampling (a proposal x kept with probability
 * min(1, p(x)/q(x)), else a token drawn from max(0, p - q)): the text has the
 * distribution of the target's sampler, but not the same random draws as
 * plain sampling with the same seed.
 *
 * A fish_spec drives sequence 0 of both models (fish_eval / fish_kv_*): while
 * it is in use, evaluate or truncate it nowhere else (a step that finds its
 * length changed fails; see fish_spec_start for starting over). The models must
 * outlive it. One thread at a time, as for the models. */
#ifndef FISH_FISH_SPEC_H
#define FISH_FISH_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "fish/fish.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fish_spec fish_spec;

typedef struct fish_spec_params {
  uint32_t struct_size;
  fish_model* draft;   /* the draft model (a separate fish_model, also for the target's own file), or NULL:
                          n-gram lookup */
  int32_t n_draft;     /* proposals per step at most, >= 1 (default 8) */
  int32_t ngram_min;   /* lookup: n-gram lengths tried, longest first: 1 <= min <= max <= 64 (default 1, 3) */
  int32_t ngram_max;
  float draft_p_min;   /* draft model: stop proposing at a token it gives less probability than this
                          (0: never, the default; llama.cpp's --draft-p-min) */
} fish_spec_params;

FISH_API fish_spec_params fish_spec_default_params(void);

/* NULL when draft can propose for target (the same n_vocab, BOS, EOS and token
 * texts), else why not, e.g. "n_vocab 2048 in the target, 512 in the draft"
 * (static storage until the next call on this thread). */
FISH_API const char* fish_spec_vocab_check(const fish_model* target, const fish_model* draft);

/* NULL on bad parameters (a draft of another vocabulary, the target as its
 * own draft object, ...) with *err set when err is not NULL. sampler NULL:
 * fish_sampler_default_params(). */
FISH_API fish_spec* fish_spec_new(fish_model* target, const fish_spec_params* params,
                                  const fish_sampler_params* sampler, fish_error** err);
FISH_API void fish_spec_free(fish_spec* s);
FISH_API const char* fish_spec_last_error(const fish_spec* s);

/* Starts a context (a prompt: 1 <= n <= the target's n_ctx tokens): the
 * sampler starts afresh and remembers them; the target and the draft model
 * evaluate all but the last (positions that this fish_spec left holding the
 * same tokens are kept; a model whose sequence 0 was changed elsewhere since
 * must be truncated to 0 first, or use a new fish_spec). 0 or a status. */
FISH_API int fish_spec_start(fish_spec* s, const int32_t* tokens, int32_t n);
/* One step: writes 1..cap tokens to out (the kept proposals, then the
 * target's own token) and returns their count, or -1 (fish_spec_last_error).
 * They join the context. An end-of-generation token ends what is written.
 * Needs fish_spec_n_tokens() <= the target's n_ctx (else fish_spec_shift). */
FISH_API int32_t fish_spec_step(fish_spec* s, int32_t* out, int32_t cap);
/* Tokens in the context: the prompt and what the steps wrote. */
FISH_API int32_t fish_spec_n_tokens(const fish_spec* s);
/* A context shift: drops context tokens [n_keep, n_keep + n_discard) (the
 * last token stays) and re-evaluates the rest at their new positions. */
FISH_API int fish_spec_shift(fish_spec* s, int32_t n_keep, int32_t n_discard);

typedef struct fish_spec_stats {
  uint32_t struct_size;
  int64_t steps;          /* target forwards */
  int64_t proposed;       /* proposals verified */
  int64_t accepted;       /* of those, kept: acceptance = accepted / proposed */
  int64_t generated;      /* tokens written: accepted + steps (an end token may cut a step short) */
  int64_t draft_forwards; /* the draft model's forwards (0 for lookup) */
  double draft_seconds;   /* drafting: the draft's forwards, or the lookup */
  double verify_seconds;  /* the target's forwards and the acceptance */
} fish_spec_stats;
FISH_API void fish_spec_get_stats(const fish_spec* s, fish_spec_stats* out);
FISH_API void fish_spec_reset_stats(fish_spec* s);

#ifdef __cplusplus
}
#endif

#endif
