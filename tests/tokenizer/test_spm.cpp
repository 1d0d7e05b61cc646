// SentencePiece on stories260K.gguf (512 tokens with <0xNN> byte tokens) and on
// small hand-made vocabularies whose merges can be followed by hand.
#include <catch2/catch.hpp>

#include "gguf/gguf_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

using namespace fish;

TEST_CASE("spm: stories260K decodes the reference greedy ids and encodes its text", "[tokenizer][spm]") {
  auto file = gguf::File::open(test::model_path("stories260K.gguf"));
  auto tok = Tokenizer::from_gguf(*file);
  CHECK(std::string(tok->kind()) == "spm");
  CHECK(tok->n_vocab() == 512);
  CHECK(tok->bos() == 1);
  CHECK(tok->eos() == 2);
  CHECK(tok->add_bos());
  CHECK(!tok->add_eos());
  CHECK(tok->is_eog(2));
  CHECK(!tok->is_eog(1));

  // SOURCES.md: the model's greedy output after BOS (pure-Python reference).
  const std::vector<int32_t> ref = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338,
                                    401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385,
                                    328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267};
  const std::string text =
      " Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
      "she saw a big, red ball. She wanted to";
  std::string streamed;
  for (int32_t id : ref) streamed += tok->token_to_piece(id);
  CHECK(streamed == text);                               // streaming: pieces concatenated
  CHECK(tok->decode(ref) == text.substr(1));             // decode drops the prefix space
  CHECK(tok->decode(ref, false, false) == text);

  // Encoding the text back (with BOS) gives BOS + the reference ids: the
  // reference is the tokenizer's own segmentation of this text.
  auto ids = tok->encode(text.substr(1), true, false);
  REQUIRE(!ids.empty());
  CHECK(ids[0] == 1);
  CHECK(std::vector<int32_t>(ids.begin() + 1, ids.end()) == ref);

  // "Once upon a time" encodes to BOS + the first ids of the reference.
  ids = tok->encode("Once upon a time", true, false);
  CHECK(ids == std::vector<int32_t>{1, 403, 407, 261, 378});
  CHECK(tok->token_text(378) == "\xe2\x96\x81time");  // "▁time"
  CHECK(tok->token_text(432) == ",");

  // Byte fallback: characters outside the 512-token vocab become <0xNN> tokens
  // (id = 3 + byte), and decode restores them exactly.
  ids = tok->encode("\xc3\xbc", false, false);  // 'ü' = C3 BC, not a piece of this vocab
  REQUIRE(tok->token_text(410) == "\xe2\x96\x81");  // "▁", the space prefix
  CHECK(ids == std::vector<int32_t>{410, 3 + 0xC3, 3 + 0xBC});
  CHECK(tok->decode(ids) == "\xc3\xbc");
  // Streaming a split character emits its bytes one by one.
  CHECK(tok->token_to_piece(3 + 0xC3) == std::string(1, '\xc3'));
  CHECK(tok->token_to_piece(3 + 0xBC) == std::string(1, '\xbc'));
  // 'é' is a piece of its own here: no byte fallback.
  CHECK(tok->encode("\xc3\xa9", false, false) == std::vector<int32_t>{410, 485});

  // Control tokens print only on request.
  CHECK(tok->token_to_piece(1).empty());
  CHECK(tok->token_to_piece(1, true) == "<s>");
  // ... and are parsed from text only on request.
  CHECK(tok->encode("<s>", false, true) == std::vector<int32_t>{1});
  CHECK(tok->encode("<s>", false, false) != std::vector<int32_t>{1});
}

TEST_CASE("spm: merge order by score, byte fallback, unk, space prefix", "[tokenizer][spm]") {
  // id: 0 <unk>  1 <s>  2 </s>  3 ▁  4 a  5 b  6 ab  7 ▁a  8 ▁ab
  const std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab",
                                         "\xe2\x96\x81" "a", "\xe2\x96\x81" "ab"};
  const std::vector<TokenAttr> types = {TokenAttr::Unknown, TokenAttr::Control, TokenAttr::Control,
                                        TokenAttr::Normal,  TokenAttr::Normal,  TokenAttr::Normal,
                                        TokenAttr::Normal,  TokenAttr::Normal,  TokenAttr::Normal};
  TokenizerConfig cfg;
  cfg.bos = 1;
  cfg.eos = 2;
  cfg.unk = 0;
  SECTION("higher score merges first") {
    // "▁ab": pairs (▁,a) -> ▁a score -1 and (a,b) -> ab score -2: ▁a wins, then ▁a+b -> ▁ab.
    auto tok = make_spm_tokenizer(toks, {0, 0, 0, -5, -5, -5, -2, -1, -3}, types, cfg);
    CHECK(tok->encode("ab", false, false) == std::vector<int32_t>{8});
    CHECK(tok->encode("ab", true, false) == std::vector<int32_t>{1, 8});
    // With ab preferred and no "▁ab" reachable from "▁"+"ab", the result is ▁ + ab.
    auto tok2 = make_spm_tokenizer({"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab", "\xe2\x96\x81" "a"},
                                   {0, 0, 0, -5, -5, -5, -1, -2},
                                   std::vector<TokenAttr>(types.begin(), types.begin() + 8), cfg);
    CHECK(tok2->encode("ab", false, false) == std::vector<int32_t>{3, 6});
  }
  SECTION("unknown characters without byte tokens map to unk") {
    auto tok = make_spm_tokenizer(toks, {0, 0, 0, -5, -5, -5, -2, -1, -3}, types, cfg);
    CHECK(tok->encode("ac", false, false) == std::vector<int32_t>{7, 0});
  }
  SECTION("add_space_prefix=false") {
    cfg.add_space_prefix = false;
    auto tok = make_spm_tokenizer(toks, {0, 0, 0, -5, -5, -5, -2, -1, -3}, types, cfg);
    CHECK(tok->encode("ab", false, false) == std::vector<int32_t>{6});
    CHECK(tok->encode("a ab", false, false) == std::vector<int32_t>{4, 8});
    CHECK(tok->decode({4, 8}) == "a ab");
  }
}
