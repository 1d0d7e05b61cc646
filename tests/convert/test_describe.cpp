// fish info's text (describe_file): the numbers of stories260K (its header facts,
// and parameters worked out from its shapes), a Q4_K_M file's type counts, a
// tokenizer-only file of another architecture, and clear errors for bad files.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "convert/describe.h"
#include "test_paths.h"

using namespace fish;
using fish::convert::describe_file;

TEST_CASE("describe: stories260K", "[convert][info]") {
  const std::string d = describe_file(test::model_path("stories260K.gguf"));
  INFO(d);
  // 64*512 (token_embd) * 2 (output) + 64 (output_norm) + 5 layers *
  // (2*64*64 + 2*64*32 + 3*64*172 + 2*64) = 292800 parameters, all F32.
  for (const char* want : {"file size          1185376 bytes", "version 3, alignment 32, 19 metadata keys",
                           "architecture       llama\n", "block count        5\n", "embedding length   64\n",
                           "attention heads    8\n", "kv heads           4\n", "head dim           8\n",
                           "feed forward       172\n", "vocab size         512\n", "context length     2048\n",
                           "rope               base 10000 (default), dimensions 8, scaling none\n",
                           "rms eps            1e-05\n", "tokenizer          llama, pre -, 512 tokens (bos 1, eos 2)\n",
                           "tensors            48 (F32 48)\n", "tensor bytes       1171200 ",
                           "parameters         292800 "})
    CHECK_THAT(d, Catch::Contains(want));
}

TEST_CASE("describe: quantised and tied models", "[convert][info]") {
  const std::string q = describe_file(test::model_path("synth-tiny-Q4_K_M.gguf"));
  INFO(q);
  CHECK_THAT(q, Catch::Contains("file type          15 (MOSTLY_Q4_K_M)"));
  CHECK_THAT(q, Catch::Contains("tensors            39 (F32 9, Q4_K 25, Q6_K 5)"));
  CHECK_THAT(q, Catch::Contains("head dim           32\n"));
  const std::string t = describe_file(test::model_path("TinyStories-656K-Q8_0.gguf"));
  INFO(t);
  CHECK_THAT(t, Catch::Contains("tensors            20 (F32 5, Q8_0 15)"));
  CHECK_THAT(t, Catch::Contains("rope               base 10000, dimensions 16"));
  CHECK_THAT(t, Catch::Contains("rms eps            1e-06"));
  CHECK_THAT(t, Catch::Contains("vocab size         2048"));
}

TEST_CASE("describe: any valid GGUF, even an unsupported architecture", "[convert][info]") {
  const std::string b = describe_file(test::model_path("vocab/ggml-vocab-bert-bge.gguf"));
  INFO(b);
  CHECK_THAT(b, Catch::Contains("architecture       bert\n"));
  CHECK_THAT(b, Catch::Contains("tokenizer          bert, pre bert-bge, 30522 tokens"));
  CHECK_THAT(b, Catch::Contains("layer norm eps     1e-12"));
  CHECK_THAT(b, Catch::Contains("tensors            0\n"));
}

TEST_CASE("describe: bad files are errors naming the file", "[convert][info]") {
  CHECK_THROWS_WITH(describe_file(test::model_path("legacy/tinyllamas-stories-260k-f32.ggufv1.gguf")),
                    Catch::Contains("tinyllamas-stories-260k-f32.ggufv1.gguf: version"));
  CHECK_THROWS_WITH(describe_file("/no/such/file.gguf"), Catch::Contains("/no/such/file.gguf: cannot open"));
  CHECK_THROWS_WITH(describe_file(test::model_path("SOURCES.md")), Catch::Contains("SOURCES.md: magic"));
}
