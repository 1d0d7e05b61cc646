// llama.cpp's vocab test cases (models/vocab/ggml-vocab-*.gguf.inp/.out): every
// case must encode (no BOS/EOS, no special parsing) to exactly the expected ids,
// and decode back to the input.
#include <catch2/catch.hpp>

#include <algorithm>
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

std::string hex(const std::string& t) {
  std::string o;
  char buf[4];
  for (unsigned char c : t) {
    std::snprintf(buf, sizeof buf, "%02x ", c);
    o += buf;
  }
  return o;
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
      if (reported.insert(name).second)  // a part of the case: the other vocabularies run
        WARN("not run: " << name << ": its .inp/.out are shipped but the GGUF is not (too large for the shared data)");
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

// Random input (fixed seed): arbitrary bytes, invalid UTF-8 included, must come
// back byte for byte, as far as the vocabulary can represent them. A BPE
// vocabulary may lack the alphabet character of bytes it never saw (0xF8 ...;
// such bytes are dropped), and DeepSeek's hold user-defined tokens spelled like
// the characters of lone bytes 0xC0/0xC1/0xF5..0xFF, which therefore decode as
// that spelling. Bytes that do not survive alone are left out of the input.
TEST_CASE("vocab round trip on random bytes and random characters", "[tokenizer][vocab]") {
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  };
  struct Expect { const char* name; int representable; };
  // How many single bytes survive alone: gpt-2 and the SPM vocabularies (byte
  // tokens) all 256. The others lack the alphabet characters of some bytes
  // (counted from the GGUF token lists): falcon 28 (control bytes, 0xC0/0xC1,
  // 0xF5..), mpt/gpt-neox 13 (0xC0, 0xC1, 0xF5..0xFF), starcoder/refact 14 (also
  // 0xF1); DeepSeek's 13 are the user-defined look-alikes described above.
  const Expect vocabs[] = {{"gpt-2", 256},     {"llama-spm", 256}, {"phi-3", 256},          {"baichuan", 256},
                           {"falcon", 228},    {"mpt", 243},       {"starcoder", 242},      {"refact", 242},
                           {"gpt-neox", 243},  {"deepseek-coder", 243}, {"deepseek-llm", 243}};
  for (const auto& v : vocabs) {
    INFO(v.name);
    auto file = gguf::File::open(test::model_path(std::string("vocab/ggml-vocab-") + v.name + ".gguf"));
    auto tok = Tokenizer::from_gguf(*file);
    bool ok[256];
    int n_ok = 0;
    for (int b = 0; b < 256; ++b) {
      const std::string s(1, char(b));
      ok[b] = tok->decode(tok->encode(s, false, false)) == s;
      n_ok += ok[b];
    }
    CHECK(n_ok == v.representable);
    auto random_bytes = [&] {
      std::string s;
      for (uint32_t i = 0, n = next() % 48; i < n; ++i) {
        int b;
        do b = int(next() % 4 == 0 ? next() % 256 : uint8_t(" \n\tab1'.,"[next() % 9]));
        while (!ok[b]);
        s.push_back(char(b));
      }
      return s;
    };
    auto random_chars = [&] {  // valid UTF-8 over all planes, without U+2581 (SPM's space mark)
      std::string s;
      for (uint32_t i = 0, n = next() % 24; i < n; ++i) {
        std::string c;
        do {
          const uint32_t r = next() % 4;
          const uint32_t cp = r == 0 ? next() % 0x80 : r == 1 ? next() % 0x800 : r == 2 ? next() % 0x10000
                                                                                       : next() % 0x110000;
          c.clear();
          if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581) continue;
          test::put_utf8(c, cp);
        } while (c.empty() || !std::all_of(c.begin(), c.end(), [&](char x) { return ok[uint8_t(x)]; }));
        s += c;
      }
      return s;
    };
    int fails = 0;
    for (int i = 0; i < 200; ++i) {
      for (const std::string& t : {random_bytes(), random_chars()}) {
        const auto ids = tok->encode(t, false, false);
        for (int32_t id : ids) REQUIRE((id >= 0 && id < tok->n_vocab()));
        const std::string back = tok->decode(ids);
        if (back != t && ++fails <= 2) WARN(v.name << ": '" << hex(t) << "' -> '" << hex(back) << "'");
      }
    }
    CHECK(fails == 0);
  }
}
