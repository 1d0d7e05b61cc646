// One GGUF image through the paths the `fish` command line takes with a model
// file, as the fuzz target (fuzz_gguf.cpp) and the regression test
// (test_fuzz_regressions.cpp) both run it:
//   info   fish info: convert::describe_file (the header alone, any architecture)
//   vocab  fish tokenize: the tokenizer-only load, then a fixed text encoded,
//          decoded and every piece of the first tokens printed
//   model  fish run / bench / perplexity: the full load (hparams, weight table
//          and shapes, tokenizer and its agreement with token_embd, KV cache,
//          CPU repacking; CPU only, no plugin), what fish_model_get_info
//          reports about the loaded model, then a 3-token prompt and one
//          greedy token evaluated on the CPU (the file's weights, whatever
//          they hold: NaN and inf included)
// Each stage runs whatever the previous ones did. A failure is an exception; a
// clean one is a fish::Error (whose message names the file and the field). A
// crash, a hang, a sanitizer report or an exception of any other type is a bug.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace fish::fuzz {

struct Stage {
  bool ok = false;     // ran to the end without an exception
  bool clean = true;   // false: it failed with an exception that is not a fish::Error
  std::string error;   // what() of the exception ("" when ok)
};

struct Outcome {
  Stage info, vocab, model;
  std::string text;  // what the stages printed (describe text, pieces, model info), for tests
  bool clean() const { return info.clean && vocab.clean && model.clean; }
};

// The file at `path`, read where it lies.
Outcome run_file(const std::string& path);

// An image in memory: written to an in-memory file (memfd, named
// /proc/self/fd/N in messages; a temporary file where there is no memfd) that
// is reused from call to call.
Outcome run_bytes(const uint8_t* data, size_t size);

}  // namespace fish::fuzz
