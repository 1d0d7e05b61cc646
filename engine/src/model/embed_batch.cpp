// Packed embeddings: see embed_batch.h.
#include "model/embed_batch.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/llama_model.h"

namespace fish {

namespace {

// One sequence and the input it holds now.
struct Lane {
  int32_t seq = 0;
  int32_t input = -1;        // -1: idle
  int32_t done = 0;          // rows of the input evaluated so far
  std::vector<double> acc;   // [n_embd]: the sum of its pooled rows
};

// The lanes hold nothing afterwards, whatever happens.
struct EmptyLanes {
  LlamaModel& m;
  const std::vector<Lane>& lanes;
  ~EmptyLanes() {
    for (const Lane& l : lanes) {
      try {
        m.seq_truncate(l.seq, 0);
      } catch (...) {
      }
    }
  }
};

bool pooled(EmbedPooling p, int32_t t, int32_t n) {
  return p == EmbedPooling::Mean || (p == EmbedPooling::Last && t == n - 1) || (p == EmbedPooling::First && t == 0);
}

// The pooled sum [n_embd] -> the vector: the mean's scale, then unit length.
void finish(std::vector<double>& acc, int32_t n, const EmbedOptions& opt, float* out) {
  const double scale_mean = opt.pooling == EmbedPooling::Mean ? 1.0 / double(n) : 1.0;
  double norm2 = 0;
  for (double& v : acc) {
    v *= scale_mean;
    norm2 += v * v;
  }
  const double inv = opt.normalize && norm2 > 0 ? 1.0 / std::sqrt(norm2) : 1.0;
  for (size_t j = 0; j < acc.size(); ++j) out[j] = float(acc[j] * inv);
}

std::string name_inputs(const std::vector<Lane*>& in_piece) {
  std::string s = in_piece.size() == 1 ? "input " : "inputs ";
  for (size_t k = 0; k < in_piece.size(); ++k) {
    if (k) s += ", ";
    s += std::to_string(in_piece[k]->input);
  }
  return s;
}

}  // namespace

void embed_batch(LlamaModel& m, const int32_t* const* tokens, const int32_t* n_tokens, int32_t n_inputs,
                 const EmbedOptions& opt, float* out) {
  if (n_inputs <= 0) return;
  const int32_t E = m.hparams().n_embd;
  std::vector<Lane> lanes(size_t(std::min(std::max(opt.n_seq, 1), n_inputs)));
  for (size_t k = 0; k < lanes.size(); ++k) lanes[k].seq = opt.seq + int32_t(k);
  EmptyLanes empty{m, lanes};

  std::vector<int32_t> tok, seq, pos;
  std::vector<uint8_t> want;
  std::vector<Lane*> in_piece;     // the lanes with rows in this piece, oldest input first
  std::vector<int32_t> first_row;  // per lane in the piece: its first row
  tok.reserve(size_t(kEmbedPiece));
  int32_t next = 0, finished = 0;
  while (finished < n_inputs) {
    // Idle lanes take the next inputs in order; a new input starts at
    // position 0, which drops what its sequence held.
    for (Lane& l : lanes)
      if (l.input < 0 && next < n_inputs) {
        l.input = next++;
        l.done = 0;
        l.acc.assign(size_t(E), 0.0);
      }
    // The piece: the oldest inputs' rows first (a long one fills it alone and
    // the others wait), each lane's rows consecutive positions.
    std::vector<Lane*> order;
    for (Lane& l : lanes)
      if (l.input >= 0) order.push_back(&l);
    std::sort(order.begin(), order.end(), [](const Lane* a, const Lane* b) { return a->input < b->input; });
    tok.clear(), seq.clear(), pos.clear(), want.clear(), in_piece.clear(), first_row.clear();
    int32_t budget = kEmbedPiece;
    for (Lane* l : order) {
      if (budget == 0) break;
      const int32_t n = n_tokens[l->input], c = std::min(n - l->done, budget);
      in_piece.push_back(l);
      first_row.push_back(int32_t(tok.size()));
      for (int32_t i = 0; i < c; ++i) {
        const int32_t t = l->done + i;
        tok.push_back(tokens[l->input][t]);
        seq.push_back(l->seq);
        pos.push_back(t);
        want.push_back(pooled(opt.pooling, t, n) ? 1 : 0);
      }
      budget -= c;
    }
    try {
      m.eval_batch_hidden(tok.data(), seq.data(), pos.data(), want.data(), int32_t(tok.size()));
    } catch (const std::exception& e) {
      throw Error(name_inputs(in_piece) + ": " + e.what());
    }
    for (size_t k = 0; k < in_piece.size(); ++k) {
      Lane& l = *in_piece[k];
      const int32_t n = n_tokens[l.input];
      const int32_t r0 = first_row[k], r1 = k + 1 < in_piece.size() ? first_row[k + 1] : int32_t(tok.size());
      for (int32_t r = r0; r < r1; ++r) {
        if (!want[size_t(r)]) continue;
        const float* h = m.hidden_row(r);
        if (!h) throw Error("input " + std::to_string(l.input) + ": no hidden state for a kept row");
        for (int32_t j = 0; j < E; ++j) l.acc[size_t(j)] += h[j];
      }
      l.done += r1 - r0;
      if (l.done == n) {
        finish(l.acc, n, opt, out + int64_t(l.input) * E);
        l.input = -1;
        ++finished;
      }
    }
  }
}

}  // namespace fish
