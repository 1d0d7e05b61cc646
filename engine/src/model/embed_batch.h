// Embeddings of many inputs packed into shared forwards: up to n_seq inputs
// at a time, each on a sequence of its own, their rows in the same
// eval_batch_hidden calls (pieces of at most kEmbedPiece rows in all), so the
// weights are read once per piece for several inputs instead of once per
// input. A short input (the usual RAG chunk of 20-200 tokens) alone fills a
// forward with a few rows; packed, eight of them make one forward.
#pragma once
#include <cstdint>

namespace fish {

class LlamaModel;

// Rows of one forward; an input longer than this (or what is left of the
// piece) goes on in the next one, its earlier positions in its sequence's KV.
constexpr int32_t kEmbedPiece = 512;

enum class EmbedPooling : int32_t { Mean = 0, Last = 1, First = 2 };

struct EmbedOptions {
  EmbedPooling pooling = EmbedPooling::Mean;
  bool normalize = true;  // unit L2 length
  int32_t seq = 0;        // the first sequence used
  int32_t n_seq = 1;      // sequences seq .. seq + n_seq - 1 may hold an input each
};

// Input i is tokens[i][0 .. n_tokens[i]) (checked by the caller: 1..n_ctx ids
// of the vocabulary); out [n_inputs * n_embd] gets the vectors row by row.
// Each vector is what the input gives alone on one sequence, bit for bit on
// the CPU: a row's hidden state depends on its own sequence's KV only, and
// the pooled sum runs over its rows in position order (in double) as alone.
// The sequences seq .. seq + min(n_seq, n_inputs) - 1 are used (what they
// held is dropped) and left empty afterwards, also when it throws;
// fish::Error's message then names the inputs of the failing forward.
void embed_batch(LlamaModel& m, const int32_t* const* tokens, const int32_t* n_tokens, int32_t n_inputs,
                 const EmbedOptions& opt, float* out);

}  // namespace fish
