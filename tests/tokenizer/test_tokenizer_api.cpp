// Tokenizer behaviour around the edges: metadata errors, special tokens,
// BOS/EOS/EOG from metadata, streaming pieces.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

using namespace fish;

namespace {

std::unique_ptr<Tokenizer> load(const std::string& vocab) {
  auto f = gguf::File::open(test::model_path("vocab/ggml-vocab-" + vocab + ".gguf"));
  return Tokenizer::from_gguf(*f);
}

// A tiny byte-level BPE vocabulary as a GGUF image: every single byte char of
// "abc" plus "ab", "abc", and one merge list.
gguf::Writer tiny_bpe() {
  gguf::Writer w;
  w.set_str("general.architecture", "llama");
  w.set_str("tokenizer.ggml.model", "gpt2");
  w.set_str("tokenizer.ggml.pre", "gpt-2");
  w.set_str_array("tokenizer.ggml.tokens", {"a", "b", "c", "ab", "abc", "<|end|>"});
  w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 3});
  w.set_str_array("tokenizer.ggml.merges", {"a b", "ab c"});
  w.set_u32("tokenizer.ggml.eos_token_id", 5);
  return w;
}

std::unique_ptr<Tokenizer> from_writer(const gguf::Writer& w, const std::string& name = "tiny.gguf") {
  auto f = gguf::File::from_bytes(w.write_to_memory(), name);
  return Tokenizer::from_gguf(*f);
}

}  // namespace

TEST_CASE("api: bert (WordPiece) is refused with a clear error", "[tokenizer][api]") {
  auto f = gguf::File::open(test::model_path("vocab/ggml-vocab-bert-bge.gguf"));
  CHECK_THROWS_WITH(Tokenizer::from_gguf(*f), Catch::Contains("unsupported tokenizer model 'bert'") &&
                                                  Catch::Contains("tokenizer.ggml.model") &&
                                                  Catch::Contains("ggml-vocab-bert-bge.gguf"));
}

TEST_CASE("api: metadata errors name the key and the value", "[tokenizer][api]") {
  CHECK(from_writer(tiny_bpe())->encode("abc", false, false) == std::vector<int32_t>{4});

  auto w = tiny_bpe();
  w.set_str("tokenizer.ggml.pre", "no-such-pre");
  CHECK_THROWS_WITH(from_writer(w), Catch::Contains("tokenizer.ggml.pre") && Catch::Contains("'no-such-pre'") &&
                                        Catch::Contains("tiny.gguf"));
  w = tiny_bpe();
  w.set_str("tokenizer.ggml.model", "t5");
  CHECK_THROWS_WITH(from_writer(w), Catch::Contains("tokenizer.ggml.model") && Catch::Contains("'t5'"));
  w = tiny_bpe();
  w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1});
  CHECK_THROWS_WITH(from_writer(w), Catch::Contains("tokenizer.ggml.token_type") && Catch::Contains("3 entries"));
  w = tiny_bpe();
  w.set_f32_array("tokenizer.ggml.scores", {0, 0});
  CHECK_THROWS_WITH(from_writer(w), Catch::Contains("tokenizer.ggml.scores"));
  w = tiny_bpe();
  w.set_str_array("tokenizer.ggml.merges", {"a b", "abc"});
  CHECK_THROWS_WITH(from_writer(w), Catch::Contains("tokenizer.ggml.merges[1]") && Catch::Contains("'abc'"));
  w = tiny_bpe();
  w.set_i32_array("tokenizer.ggml.tokens", {1, 2});
  CHECK_THROWS_WITH(from_writer(w), Catch::Contains("tokenizer.ggml.tokens"));

  gguf::Writer no_model;
  no_model.set_str("general.architecture", "llama");
  CHECK_THROWS_WITH(from_writer(no_model), Catch::Contains("tokenizer.ggml.model") && Catch::Contains("missing"));
  gguf::Writer no_merges;
  no_merges.set_str("tokenizer.ggml.model", "gpt2");
  no_merges.set_str_array("tokenizer.ggml.tokens", {"a"});
  CHECK_THROWS_WITH(from_writer(no_merges), Catch::Contains("tokenizer.ggml.merges") && Catch::Contains("missing"));

  // make_bpe_tokenizer: unknown pre-tokenizer and mismatched types.
  CHECK_THROWS_WITH(make_bpe_tokenizer({"a"}, {}, "nope"), Catch::Contains("'nope'"));
  CHECK_THROWS_AS(make_bpe_tokenizer({"a", "b"}, {}, "gpt-2", {TokenAttr::Normal}), Error);
  // Ids out of range throw rather than read out of bounds.
  auto tok = from_writer(tiny_bpe());
  CHECK_THROWS_AS(tok->token_to_piece(6), Error);
  CHECK_THROWS_AS(tok->decode({0, -1}), Error);
}

TEST_CASE("api: special tokens only with parse_special, user-defined always", "[tokenizer][api]") {
  auto gpt2 = load("gpt-2");
  CHECK(gpt2->encode("<|endoftext|>", false, true) == std::vector<int32_t>{50256});
  const auto plain = gpt2->encode("<|endoftext|>", false, false);
  CHECK(plain.size() > 1);
  CHECK(gpt2->decode(plain) == "<|endoftext|>");
  CHECK(gpt2->encode("a<|endoftext|>b", false, true) ==
        std::vector<int32_t>{gpt2->encode("a", false, false)[0], 50256, gpt2->encode("b", false, false)[0]});
  CHECK(gpt2->token_to_piece(50256).empty());
  CHECK(gpt2->token_to_piece(50256, true) == "<|endoftext|>");
  CHECK(gpt2->decode({50256}, true) == "<|endoftext|>");

  // gpt-neox: runs of spaces are user-defined tokens, matched without --special
  // (same ids as MPT's test case "  Hello" -> 50276 12092).
  auto neox = load("gpt-neox");
  CHECK(neox->encode("  Hello", false, false) == std::vector<int32_t>{50276, 12092});
  CHECK(neox->decode({50276, 12092}) == "  Hello");

  // phi-3 (SPM): <|user|> and <|endoftext|> are control tokens, "</s>" is
  // (oddly) user-defined in this vocab, so it is matched even without --special.
  auto phi = load("phi-3");
  CHECK(phi->token_attr(32010) == TokenAttr::Control);
  CHECK(phi->token_attr(2) == TokenAttr::UserDefined);
  CHECK(phi->encode("<|user|>", false, true) == std::vector<int32_t>{32010});
  const auto plain_user = phi->encode("<|user|>", false, false);
  CHECK(plain_user.size() > 1);
  CHECK(phi->decode(plain_user) == "<|user|>");
  CHECK(phi->encode("<|endoftext|>", false, true) == std::vector<int32_t>{32000});
  CHECK(phi->encode("</s>", false, false) == std::vector<int32_t>{2});
  // The text after a special token gets the SPM space prefix again.
  std::vector<int32_t> expect{32010};
  for (int32_t id : phi->encode("Hi", false, false)) expect.push_back(id);
  CHECK(phi->encode("<|user|>Hi", false, true) == expect);
}

TEST_CASE("api: BOS/EOS/EOG from metadata and family defaults", "[tokenizer][api]") {
  auto spm = load("llama-spm");
  CHECK(spm->add_bos());
  CHECK(spm->bos() == 1);
  CHECK(spm->encode("Hello", true, false).front() == 1);
  CHECK(spm->encode("", true, false) == std::vector<int32_t>{1});
  CHECK(spm->encode("", false, false).empty());

  auto ds = load("deepseek-coder");  // add_bos_token = true, bos 32013
  CHECK(ds->add_bos());
  CHECK(ds->encode("x", true, false).front() == 32013);
  CHECK(ds->is_eog(32014));

  auto gpt2 = load("gpt-2");  // no add_bos_token key: BPE default is no BOS
  CHECK(!gpt2->add_bos());
  CHECK(gpt2->encode("Hello", true, false) == gpt2->encode("Hello", false, false));
  CHECK(gpt2->is_eog(50256));

  auto phi = load("phi-3");
  CHECK(phi->eos() == 32000);
  CHECK(phi->is_eog(32000));
  CHECK(phi->is_eog(32007));  // <|end|>: end of turn
  CHECK(!phi->is_eog(32010));

  auto w = tiny_bpe();
  w.set_bool("tokenizer.ggml.add_eos_token", true);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_u32("tokenizer.ggml.bos_token_id", 0);
  w.set_u32("tokenizer.ggml.eot_token_id", 3);
  auto tiny = from_writer(w);
  CHECK(tiny->encode("c", true, false) == std::vector<int32_t>{0, 2, 5});
  CHECK(tiny->is_eog(5));
  CHECK(tiny->is_eog(3));
  CHECK(!tiny->is_eog(2));
}

TEST_CASE("api: streaming pieces split a multi-byte character over byte tokens", "[tokenizer][api]") {
  auto gpt2 = load("gpt-2");
  const std::string text = " \xf0\x9f\xa6\x99";  // " 🦙": three tokens, the last two one byte each
  const auto ids = gpt2->encode(text, false, false);
  REQUIRE(ids.size() == 3);
  std::string streamed;
  size_t single_bytes = 0;
  for (int32_t id : ids) {
    const std::string p = gpt2->token_to_piece(id);
    single_bytes += p.size() == 1 ? 1 : 0;
    streamed += p;
  }
  CHECK(single_bytes == 2);
  CHECK(streamed == text);
  CHECK(std::string(gpt2->kind()) == "bpe");
  CHECK(gpt2->pre_name() == "gpt-2");
  CHECK(gpt2->token_text(15496) == "Hello");
  CHECK(gpt2->token_attr(50256) == TokenAttr::Control);

  // Invalid UTF-8 survives a round trip byte for byte.
  const std::string bad = "a\xff\xc3(b\x80";
  CHECK(gpt2->decode(gpt2->encode(bad, false, false)) == bad);
  auto spm = load("llama-spm");
  CHECK(spm->decode(spm->encode(bad, false, false)) == bad);
}
