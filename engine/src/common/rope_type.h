// How RoPE pairs the dimensions of a head: Normal rotates (2i, 2i+1) (llama),
// NeoX rotates (i, i + n_rot/2) (qwen2, qwen3). The numbers are the plugin
// ABI's FISH_ROPE_* values, so a cast converts.
#pragma once
#include <cstdint>

namespace fish {

enum class RopeType : uint32_t { Normal = 0, NeoX = 2 };

}  // namespace fish
