// A forward that fails part-way through packed embeddings (fish::embed_batch,
// called on the engine directly: the C API checks every input first, so a
// failure cannot be provoked through it on the CPU). An input longer than the
// context is evaluated piece by piece until its positions pass n_ctx:
//   - the error names the inputs of the failing forward ("inputs 1, 2: ..."
//     packed, "input 1: ..." one at a time), and says why;
//   - every sequence used is empty afterwards, the earlier pieces' positions
//     and what the sequences held before included; one outside the range
//     keeps its KV.
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/error.h"
#include "model/embed_batch.h"
#include "model/llama_model.h"
#include "test_paths.h"

using fish::LlamaModel;

namespace {

std::vector<int32_t> stream(int32_t n, int32_t seed) {
  std::vector<int32_t> v{1};
  for (int32_t i = 1; i < n; ++i) v.push_back(3 + (seed * 131 + i * 37) % 500);  // stories260K: 512 ids
  return v;
}

void fill(LlamaModel& m, int32_t s, const std::vector<int32_t>& tok) {
  std::vector<int32_t> seq(tok.size(), s), pos;
  for (size_t i = 0; i < tok.size(); ++i) pos.push_back(int32_t(i));
  m.eval_batch(tok.data(), seq.data(), pos.data(), nullptr, int32_t(tok.size()));
}

// The message of what embed_batch throws ("" when it does not).
std::string failure(LlamaModel& m, const std::vector<std::vector<int32_t>>& in, int32_t n_seq) {
  std::vector<const int32_t*> ptr;
  std::vector<int32_t> len;
  for (const auto& v : in) ptr.push_back(v.data()), len.push_back(int32_t(v.size()));
  std::vector<float> out(in.size() * size_t(m.hparams().n_embd));
  fish::EmbedOptions o;
  o.n_seq = n_seq;
  try {
    fish::embed_batch(m, ptr.data(), len.data(), int32_t(in.size()), o, out.data());
  } catch (const fish::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("embed batch: a forward failing part-way names its inputs and leaves the sequences empty", "[embed]") {
  fish::ModelOptions o;
  o.n_threads = 2;
  o.gpu_layers = 0;
  o.n_ctx = 600;
  o.n_seq = 4;
  auto m = LlamaModel::load(fish::test::model_path("stories260K.gguf"), o);
  const std::vector<int32_t> held = stream(30, 9), outside = stream(12, 8);

  // Packed on 3 sequences: the first piece holds input 0 (100 rows) and 412
  // rows of input 1; the second input 1's rows from 412 on and input 2's,
  // and input 1 passes the context at position 600.
  fill(*m, 2, held);
  fill(*m, 3, outside);
  std::string e = failure(*m, {stream(100, 0), stream(700, 1), stream(5, 2)}, 3);
  INFO(e);
  CHECK(e.rfind("inputs 1, 2: ", 0) == 0);
  CHECK(e.find("context length 600") != std::string::npos);
  for (int32_t s = 0; s < 3; ++s) CHECK(m->seq_len(s) == 0);
  CHECK(m->seq_len(3) == int32_t(outside.size()));

  // One at a time: input 1's third piece (positions 512..) fails.
  fill(*m, 0, held);
  e = failure(*m, {stream(5, 0), stream(700, 1)}, 1);
  CHECK(e.rfind("input 1: ", 0) == 0);
  CHECK(e.find("context length 600") != std::string::npos);
  CHECK(m->seq_len(0) == 0);
  CHECK(m->seq_len(3) == int32_t(outside.size()));

  // The model goes on: the same call without the long input succeeds.
  CHECK(failure(*m, {stream(100, 0), stream(5, 2)}, 3).empty());
}
