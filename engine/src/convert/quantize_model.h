// fish quantize: re-quantises every matrix of a GGUF model to Q8_0, Q4_0 or
// Q4_K_M (the mix of type_mix.h), copying all metadata (general.file_type
// updated) and every 1-D tensor as it is. Each matrix row is dequantised to f32
// and quantised to its new type, in parallel, streamed chunk by chunk; a matrix
// already of its target type is copied unchanged (lossless).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace fish::convert {

struct QuantizeSummary {
  uint64_t file_bytes = 0;
  int n_requantized = 0;  // matrices converted to another type
  int n_copied = 0;       // tensors written unchanged (1-D, already the target type, or kept)
};

// type: "Q8_0", "Q4_0" or "Q4_K_M". note(msg) receives one line per tensor that
// could not take the format's type (and why, and what it got instead).
// Throws fish::Error naming the file / tensor on any failure; out is then untouched.
QuantizeSummary quantize_model(const std::string& in, const std::string& out, const std::string& type,
                               int n_threads, const std::function<void(const std::string&)>& note);

}  // namespace fish::convert
