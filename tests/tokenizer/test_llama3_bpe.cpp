// Llama 3 (pre-tokenizer "llama-bpe"): its GGUF is too large to ship, so the
// tokenizer is built from the Llama 3.2 encoder.json (token -> id) and
// vocab.bpe (merges in rank order) and must pass every ggml-vocab-llama-bpe case.
#include <catch2/catch.hpp>

#include <sstream>

#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tok_test_util.h"

using namespace fish;

namespace {

std::unique_ptr<Tokenizer> load_llama3() {
  std::string json, bpe, err;
  const std::string dir = test::model_path("tokenizers/llama3.2/");
  REQUIRE(test::read_file(dir + "encoder.json", json));
  REQUIRE(test::read_file(dir + "vocab.bpe", bpe));
  std::vector<std::pair<std::string, int64_t>> entries;
  INFO(err);
  REQUIRE(test::parse_json_string_int_map(json, entries, err));
  REQUIRE(entries.size() == 128000);
  std::vector<std::string> tokens(entries.size());
  for (auto& [text, id] : entries) {
    REQUIRE(id >= 0);
    REQUIRE(size_t(id) < tokens.size());
    REQUIRE(tokens[size_t(id)].empty());  // ids are a permutation of 0..127999
    tokens[size_t(id)] = std::move(text);
  }
  std::vector<std::string> merges;
  std::istringstream lines(bpe);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    merges.push_back(line);
  }
  REQUIRE(merges.size() == 280147);
  return make_bpe_tokenizer(std::move(tokens), std::move(merges), "llama-bpe");
}

}  // namespace

TEST_CASE("llama-bpe from encoder.json + vocab.bpe passes every ggml-vocab-llama-bpe case", "[tokenizer][llama3]") {
  auto tok = load_llama3();
  CHECK(std::string(tok->kind()) == "bpe");
  CHECK(tok->pre_name() == "llama-bpe");
  CHECK(tok->add_bos());  // Llama 3 vocabularies add <|begin_of_text|> by default

  std::vector<test::VocabCase> cases;
  std::string err;
  const std::string base = test::model_path("vocab/ggml-vocab-llama-bpe.gguf");
  REQUIRE(test::read_vocab_cases(base + ".inp", base + ".out", cases, err));
  REQUIRE(cases.size() == 46);
  int fails = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto ids = tok->encode(cases[i].text, false, false);
    if (ids != cases[i].ids) {
      ++fails;
      std::ostringstream got, want;
      for (auto v : ids) got << v << ' ';
      for (auto v : cases[i].ids) want << v << ' ';
      WARN("case " << i << ": expected " << want.str() << "\n got " << got.str());
    }
    CHECK(tok->decode(ids) == cases[i].text);
  }
  CHECK(fails == 0);

  // Known Llama 3 facts: "Hello world" is two tokens, digits group by three.
  CHECK(tok->encode("Hello world", false, false) == std::vector<int32_t>{9906, 1917});
  CHECK(tok->encode("1234567", false, false).size() == 3);
}
