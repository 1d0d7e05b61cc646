// The file formats `fish synth` and `fish quantize` produce, and which GGUF type
// each tensor gets in them (the per-tensor "mix"; for Q4_K_M llama.cpp's).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/ggml_type.h"

namespace fish::convert {

enum class Format { F32, F16, Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K };

std::optional<Format> parse_format(std::string_view s);  // "Q4_K_M" (case-insensitive)
const char* format_name(Format f);
// general.file_type (llama.cpp's llama_ftype numbering): F32 0, F16 1, Q4_0 2,
// Q8_0 7, Q4_K_M 15, Q5_K_M 17, Q6_K 18.
uint32_t file_type(Format f);

// "blk.12.attn_v.weight" -> 12; -1 for a tensor outside the blocks.
int layer_of(std::string_view name);

// llama.cpp's "more bits" layers of the _M mixes: the first and last eighth of
// the blocks and every third block in between.
bool use_more_bits(int layer, int n_layer);

struct TypeChoice {
  GgmlType type;
  std::string note;  // set when the format's own type did not fit the row length
};

// The type tensor `name` (n_dims dimensions, row length ne0) gets in format f.
// n_layer: the model's block count; tied: the model has no output.weight, so
// token_embd is also the output projection; keep: its type now (what it stays
// when nothing fits). 1-D tensors (norms, biases, rope_freqs) always keep theirs.
//
// Q4_K_M / Q5_K_M: Q6_K for the output projection and for attn_v / ffn_down (and
// ffn_down_exps) in the use_more_bits layers, Q4_K / Q5_K for every other matrix.
// Q6_K: Q6_K for every matrix. With n_expert == 8 (Mixtral) attn_v and attn_k
// are Q8_0 in all three, and attn_output Q5_K in Q4_K_M, as llama.cpp's
// llama_tensor_get_type does. The MoE router
// (ffn_gate_inp) is never quantised: it keeps its type in every format. A row length that is not a
// multiple of 256 falls back as llama.cpp does: Q4_K -> Q5_0 (Q4_0 while fish
// cannot quantise Q5_0), Q5_K -> Q5_1 (Q8_0 while fish cannot quantise Q5_1:
// more bits, never fewer), Q6_K -> Q8_0; one that is not a multiple of 32 either
// keeps its type.
TypeChoice choose_type(Format f, std::string_view name, int64_t ne0, uint32_t n_dims, int n_layer, bool tied,
                       GgmlType keep, int n_expert = 0);

}  // namespace fish::convert
