// Pre-tokenizer splits, derived by hand from each family's patterns.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "tokenizer/pretokenizer.h"

using namespace fish;
using V = std::vector<std::string>;

TEST_CASE("pretokenizer: gpt-2", "[tokenizer][pre]") {
  PreTokenizer p("gpt-2");
  CHECK(p.split("Hello world") == V{"Hello", " world"});
  CHECK(p.split("   Hello") == V{"  ", " Hello"});
  CHECK(p.split("I've 'RE") == V{"I", "'ve", " '", "RE"});
  CHECK(p.split("a\n\nb") == V{"a", "\n", "\n", "b"});
  CHECK(p.split("x  \t") == V{"x", "  \t"});
  CHECK(p.split("3.14 !!") == V{"3", ".", "14", " !!"});
  CHECK(p.split("").empty());
}

TEST_CASE("pretokenizer: llama-bpe (Llama 3) and qwen2", "[tokenizer][pre]") {
  PreTokenizer l("llama-bpe");
  CHECK(l.ignore_merges());
  CHECK(l.default_add_bos());
  CHECK(l.split("Hello, world!\n\n") == V{"Hello", ",", " world", "!\n\n"});
  CHECK(l.split("12345") == V{"123", "45"});
  CHECK(l.split("  hi") == V{" ", " hi"});
  CHECK(l.split("don'T") == V{"don", "'T"});
  CHECK(l.split("a \n\n b") == V{"a", " \n\n", " b"});
  CHECK(l.split("$x") == V{"$x"});
  PreTokenizer q("qwen2");
  CHECK(!q.ignore_merges());
  CHECK(q.split("12345") == V{"1", "2", "3", "4", "5"});
  CHECK(q.split("Hello, y'all") == V{"Hello", ",", " y", "'all"});
}

TEST_CASE("pretokenizer: multi-step families", "[tokenizer][pre]") {
  CHECK(PreTokenizer("default").split("Hello, world 12345") == V{"Hello", ",", " world", " ", "123", "45"});
  CHECK(PreTokenizer("falcon").split("x=1234") == V{"x", "=", "123", "4"});
  CHECK(PreTokenizer("starcoder").split("ab12 c") == V{"ab", "1", "2", " c"});
  CHECK(PreTokenizer("refact").split("ab12 c") == V{"ab", "1", "2", " c"});
  CHECK(PreTokenizer("deepseek-coder").split("a1 b") == V{"a", "1", " b"});
  CHECK(PreTokenizer("deepseek-llm").split("Hello \xe4\xb8\x96\xe7\x95\x8c\n") ==
        V{"Hello", " ", "\xe4\xb8\x96\xe7\x95\x8c", "\n"});
  CHECK(PreTokenizer("mpt").split("a  b") == V{"a", " ", " b"});
}

TEST_CASE("pretokenizer: pieces always cover the input exactly", "[tokenizer][pre]") {
  const std::string text =
      "ied 4 \xc2\xbd months\n\n\t  Hello, y'all! \xf0\x9f\xa6\x99 \xe6\x88\x91 12345 ------===\xff\xfe\xc3 \r\n ";
  for (const auto& name : PreTokenizer::known_names()) {
    INFO(name);
    PreTokenizer p(name);
    std::string joined;
    for (const auto& piece : p.split(text)) {
      CHECK(!piece.empty());
      joined += piece;
    }
    CHECK(joined == text);
  }
}

TEST_CASE("pretokenizer: an unknown name is an error naming it", "[tokenizer][pre]") {
  CHECK_THROWS_WITH(PreTokenizer("no-such-pre"), Catch::Contains("no-such-pre"));
  CHECK(!PreTokenizer::is_known("no-such-pre"));
  for (const char* n : {"default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon", "mpt",
                        "starcoder", "refact", "gpt-neox"})
    CHECK(PreTokenizer::is_known(n));
}
