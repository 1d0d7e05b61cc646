// A synthetic SentencePiece-style vocabulary of any size: <unk> <s> </s>, the 256
// byte tokens <0x00>..<0xFF>, then distinct letter pieces, shortest first, each
// as a word start ("▁" + letters) and as a continuation. Any text of lower-case
// letters tokenises with it; everything else falls back to the byte tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace fish::convert {

struct SynthVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;       // 0 for the special and byte tokens, then descending
  std::vector<int32_t> token_type; // 2 unknown, 3 control, 6 byte, 1 normal
};

// n_vocab >= 259 (the specials and the bytes); throws fish::Error otherwise.
SynthVocab make_synth_vocab(int n_vocab);

}  // namespace fish::convert
