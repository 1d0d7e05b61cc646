#include <catch2/catch.hpp>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "test_paths.h"

using namespace fish;

TEST_CASE("gguf reader: stories260K metadata and tensors", "[gguf]") {
  auto f = gguf::File::open(test::model_path("stories260K.gguf"));
  CHECK(f->version() == 3);
  CHECK(f->tensors().size() == 48);
  CHECK(f->alignment() == 32);
  CHECK(*f->get_str("general.architecture") == "llama");
  CHECK(*f->get_u32("llama.block_count") == 5);
  CHECK(*f->get_u32("llama.embedding_length") == 64);
  CHECK(*f->get_u32("llama.attention.head_count_kv") == 4);
  const gguf::Array* toks = f->get_arr("tokenizer.ggml.tokens");
  REQUIRE(toks);
  CHECK(toks->size == 512);
  CHECK(toks->string(1) == "<s>");
  const gguf::TensorInfo* t = f->tensor("token_embd.weight");
  REQUIRE(t);
  CHECK(t->ne[0] == 64);
  CHECK(t->ne[1] == 512);
  CHECK(t->type == GgmlType::F32);
  CHECK(t->nbytes == 64 * 512 * 4);
  CHECK_THROWS_AS(f->get_str("llama.block_count"), Error);
  CHECK_FALSE(f->get_u32("no.such.key"));
}

TEST_CASE("gguf reader: v1 is refused with a message saying so", "[gguf]") {
  try {
    gguf::File::open(test::model_path("legacy/tinyllamas-stories-260k-f32.ggufv1.gguf"));
    FAIL("v1 file was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("version 1 is not supported") != std::string::npos);
  }
}
