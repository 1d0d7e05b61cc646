// Older Mixtral GGUFs store each expert as a tensor of its own
// ("blk.N.ffn_gate.E.weight", ffn_up.E, ffn_down.E for E < expert_count: the
// names of llama.cpp's LLM_TENSOR_FFN_{GATE,UP,DOWN}_EXP, 2-D [n_in, n_out])
// where newer files hold one stacked 3-D tensor "blk.N.ffn_gate_exps.weight"
// [n_in, n_out, n_expert]. stack_view sees whether the per-expert tensors lie
// one after another in the file (same type and shape, each starting where the
// previous one ends), so that they can be read as one stack without a copy.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace fish::gguf {

// The name of expert e's own tensor of kind ("ffn_gate") in layer prefix p
// ("blk.3."): "blk.3.ffn_gate.5.weight".
std::string expert_tensor_name(const std::string& p, const std::string& kind, int64_t e);

// parts: expert 0 .. n-1's tensors (non-null, 2-D, one type and shape: the
// caller checks). A 3-D tensor named `name` [n_in, n_out, n] over their bytes
// (data and offset the first one's) when they are contiguous in the file;
// otherwise nothing.
std::optional<TensorInfo> stack_view(const std::vector<const TensorInfo*>& parts, const std::string& name);

}  // namespace fish::gguf
