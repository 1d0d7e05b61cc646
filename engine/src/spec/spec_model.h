// What speculative decoding needs of a model: sequence 0's evaluation, logits,
// KV length and truncation, and enough of its vocabulary to check that a draft
// speaks the target's. The C API implements it over a fish_model; tests over a
// made-up model. Failures are thrown as fish::Error.
#pragma once
#include <cstdint>
#include <string>

namespace fish::spec {

class SpecModel {
 public:
  virtual ~SpecModel() = default;
  virtual int32_t n_vocab() const = 0;
  virtual int32_t n_ctx() const = 0;
  virtual int32_t kv_len() const = 0;
  // n tokens at positions pos..pos+n-1 (positions at or past pos replaced);
  // all_logits: keep every row's logits, else the last row's.
  virtual void eval(const int32_t* tokens, int32_t n, int32_t pos, bool all_logits) = 0;
  // Logits [n_vocab] of row i of the last eval (-1: the last row); valid until
  // the next eval or truncate.
  virtual const float* logits(int32_t i) = 0;
  virtual void truncate(int32_t n) = 0;  // keeps positions < n
  virtual bool is_eog(int32_t token) const = 0;
  // The token's text with special tokens spelled out (for the vocabulary check).
  virtual std::string token_text(int32_t token) const = 0;
  virtual int32_t bos() const = 0;  // -1: none
  virtual int32_t eos() const = 0;
};

}  // namespace fish::spec
