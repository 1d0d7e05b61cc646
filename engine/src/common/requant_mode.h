// FISH_GPU_REQUANT: which weight matrices get a smaller re-quantised copy on
// the compute device (online re-quantisation, spec "Online re-quantisation";
// model/requant.h does it). The GGUF file and the CPU path are untouched.
//
//   0     off (default)
//   1     every K-quant matrix of the GPU layers (Q4_K, Q5_K, Q6_K) to FQ3: smallest
//   2     Q6_K and Q5_K matrices to Q4_K only: mildest
//   3     Q4_K -> FQ3 and Q6_K / Q5_K -> Q4_K
//   auto  the mildest of 0, 2, 3, 1 that puts every layer and the output
//         projection on the device within its memory; if none does, the one
//         that places the most layers
// The output projection is never made 3-bit (it decides every token's
// argmax): in modes 1-3 a Q6_K / Q5_K head becomes Q4_K and a Q4_K one stays.
#pragma once
#include <string>

namespace fish {

enum class RequantMode { Off = 0, AllFq3 = 1, ToQ4K = 2, Mixed = 3, Auto = 4 };

// "0", "1", "2", "3", "auto" (also "off"); false for anything else.
bool parse_requant_mode(const std::string& text, RequantMode* out);
// "0" .. "3", "auto".
const char* requant_mode_name(RequantMode m);
// What parse_requant_mode accepts, for messages.
constexpr const char* kRequantModeValues = "0 (off), 1, 2, 3 or auto";

}  // namespace fish
