// Small valid GGUFs for the fuzz target's seeds and the crafted regression
// files (make_fuzz_seeds.cpp): tiny Llama-family models of every architecture
// fish loads, with any tensor types, and vocabulary-only files cut down from
// real tokenizers (read in place from the shared models folder).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace fish::fuzz {

struct TinyModel {
  std::string arch = "llama";  // llama, qwen2 (q/k/v biases), qwen3 (q/k norms)
  int n_embd = 32, n_layer = 1, n_head = 4, n_head_kv = 2;
  int head_dim = 0;  // 0: n_embd / n_head (else attention.key_length)
  int n_ff = 64, n_vocab = 260, n_ctx = 256;
  bool tied = false;       // no output.weight
  bool rope_freqs = false; // a rope_freqs.weight tensor (Llama 3 scaling)
  GgmlType embd_type = GgmlType::Q8_0, out_type = GgmlType::Q8_0, norm_type = GgmlType::F32;
  // The 7 matrices of each layer (q, k, v, o, gate, up, down) take these in turn.
  std::vector<GgmlType> layer_types = {GgmlType::Q8_0};
  float embd_mean = 0.f, embd_scale = 0.5f;  // token_embd values: mean + scale * [-1, 1)
  uint64_t seed = 1;
};

// Metadata and tensors of a tiny model with fish synth's SentencePiece-style
// vocabulary (n_vocab >= 259; a smaller one has no byte tokens). Tensor values are small random numbers
// quantised to their type; the writer generates them when it writes.
void add_tiny_model(gguf::Writer& w, const TinyModel& m);

// Replaces the vocabulary of a tiny model's metadata with the first n_tokens
// of `vocab`'s tokenizer (merges kept only where both parts and the result are
// among them, at most max_merges), every other tokenizer.ggml.* key copied.
void copy_tokenizer(gguf::Writer& w, const gguf::File& vocab, uint32_t n_tokens, uint32_t max_merges = 4000);

// The number of tokens copy_tokenizer keeps (n_tokens or the vocabulary's size).
uint32_t kept_tokens(const gguf::File& vocab, uint32_t n_tokens);

// The seed corpus: tiny models of each architecture and many tensor types, and
// vocabulary-only files cut down from SHARED/models/vocab/*.gguf (read in
// place). Returns the paths written into dir.
std::vector<std::string> write_seeds(const std::string& dir, const std::string& shared);

// The crafted files for the bugs issue 22 lists (fixed in cfe9f2d), on the
// smallest model (test_fuzz_regressions.cpp checks their exact messages).
std::vector<std::string> write_regressions(const std::string& dir);

}  // namespace fish::fuzz
