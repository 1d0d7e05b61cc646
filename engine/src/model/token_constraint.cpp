#include "model/token_constraint.h"

#include "tokenizer/tokenizer.h"

namespace fish {

std::shared_ptr<const JsonVocab> JsonVocab::from(const Tokenizer& t) {
  auto v = std::make_shared<JsonVocab>();
  const int32_t n = t.n_vocab();
  v->piece.resize(size_t(n));
  v->eog.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    v->piece[size_t(i)] = t.token_to_piece(i, false);
    v->eog[size_t(i)] = t.is_eog(i) ? 1 : 0;
  }
  return v;
}

}  // namespace fish
