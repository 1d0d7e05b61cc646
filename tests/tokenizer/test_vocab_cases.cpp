// llama.cpp's vocab test cases (models/vocab/ggml-vocab-*.gguf.inp/.out): every
// case must encode (no BOS/EOS, no special parsing) to exactly the expected ids,
// and decode back to the input.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tok_test_util.h"

using namespace fish;

namespace {

std::string ids_str(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

std::string escaped(const std::string& t) {
  std::string o;
  for (unsigned char c : t) {
    if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '\r') o += "\\r";
    else o.push_back(char(c));
  }
  return o;
}

// Runs every case of one vocab; returns the number of failures (details via WARN).
int run_cases(const Tokenizer& tok, const std::string& name, const std::vector<test::VocabCase>& cases,
              int* n_roundtrip_fail) {
  int fails = 0, rt_fails = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto ids = tok.encode(c.text, false, false);
    if (ids != c.ids) {
      ++fails;
      WARN(name << " case " << i << " '" << escaped(c.text) << "'\n  expected: " << ids_str(c.ids)
                << "\n  got:      " << ids_str(ids));
    }
    const std::string back = tok.decode(ids);
    if (back != c.text) {
      ++rt_fails;
      WARN(name << " case " << i << " round trip: '" << escaped(c.text) << "' -> '" << escaped(back) << "'");
    }
  }
  *n_roundtrip_fail = rt_fails;
  return fails;
}

}  // namespace

TEST_CASE("vocab test cases: every shipped ggml-vocab GGUF with .inp/.out is exact", "[tokenizer][vocab]") {
  const std::string dir = test::model_path("vocab");
  REQUIRE(std::filesystem::is_directory(dir));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    const std::string suffix = ".gguf.inp";
    if (f.size() > suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(f.substr(0, f.size() - suffix.size()));  // "ggml-vocab-gpt-2"
  }
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() >= 10);

  int n_run = 0;
  for (const auto& name : names) {
    const std::string gguf_path = dir + "/" + name + ".gguf";
    if (name == "ggml-vocab-bert-bge") continue;   // WordPiece: refused, see the API test
    if (name == "ggml-vocab-llama-bpe") continue;  // built from encoder.json/vocab.bpe, see test_llama3_bpe
    if (!std::filesystem::exists(gguf_path)) {
      static std::set<std::string> reported;  // Catch re-enters this test once per section
      if (reported.insert(name).second)
        std::printf("SKIPPED %s: its .inp/.out are shipped but the GGUF is not (too large for the shared data)\n",
                  name.c_str());
      continue;
    }
    DYNAMIC_SECTION(name) {
      std::vector<test::VocabCase> cases;
      std::string err;
      REQUIRE(test::read_vocab_cases(gguf_path + ".inp", gguf_path + ".out", cases, err));
      INFO(err);
      REQUIRE(cases.size() >= 46);
      auto file = gguf::File::open(gguf_path);
      auto tok = Tokenizer::from_gguf(*file);
      int rt = 0;
      const int fails = run_cases(*tok, name, cases, &rt);
      CHECK(fails == 0);
      CHECK(rt == 0);
    }
    ++n_run;
  }
  // llama-spm, phi-3, gpt-2, mpt, starcoder, refact, falcon, deepseek-coder, deepseek-llm.
  CHECK(n_run == 9);
}

// Vocabularies shipped without test cases: they must load and round-trip every
// test string of the shared .inp.
TEST_CASE("vocab without cases: gpt-neox and baichuan load and round-trip", "[tokenizer][vocab]") {
  std::vector<test::VocabCase> cases;
  std::string err;
  const std::string base = test::model_path("vocab/ggml-vocab-gpt-2.gguf");
  REQUIRE(test::read_vocab_cases(base + ".inp", base + ".out", cases, err));
  for (const char* name : {"ggml-vocab-gpt-neox.gguf", "ggml-vocab-baichuan.gguf"}) {
    DYNAMIC_SECTION(name) {
      auto file = gguf::File::open(test::model_path(std::string("vocab/") + name));
      auto tok = Tokenizer::from_gguf(*file);
      CHECK(tok->n_vocab() > 50000);
      for (const auto& c : cases) {
        const auto ids = tok->encode(c.text, false, false);
        CHECK(tok->decode(ids) == c.text);
        if (!c.text.empty()) CHECK(!ids.empty());
      }
    }
  }
}
