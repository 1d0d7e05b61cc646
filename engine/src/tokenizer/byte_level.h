// The byte-level BPE alphabet (GPT-2): every byte value stands for one printable
// code point, so that a vocabulary of strings can hold arbitrary bytes.
// Printable Latin-1 bytes (0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF) map to
// themselves; the other 68 bytes map, in increasing order, to U+0100, U+0101, ...
// (so space 0x20 is U+0120 'Ġ' and newline 0x0A is U+010A 'Ċ').
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fish {

class ByteLevel {
 public:
  static const ByteLevel& get();

  uint32_t byte_to_cp(uint8_t b) const { return byte_to_cp_[b]; }
  // The UTF-8 of byte b's code point (1 or 2 bytes).
  const std::string& byte_to_utf8(uint8_t b) const { return byte_utf8_[b]; }
  // -1 when cp is not in the alphabet.
  int byte_from_cp(uint32_t cp) const { return cp < cp_to_byte_.size() ? cp_to_byte_[cp] : -1; }

  // Raw bytes -> alphabet text, and back. decode() keeps code points that are
  // not in the alphabet as their UTF-8 (tokens written as plain text).
  std::string encode(std::string_view bytes) const;
  std::string decode(std::string_view text) const;

 private:
  ByteLevel();
  std::array<uint32_t, 256> byte_to_cp_{};
  std::array<std::string, 256> byte_utf8_;
  std::array<int16_t, 324> cp_to_byte_{};  // alphabet code points are all < 0x144
};

}  // namespace fish
