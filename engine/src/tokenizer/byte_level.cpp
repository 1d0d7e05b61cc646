#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

namespace fish {

const ByteLevel& ByteLevel::get() {
  static const ByteLevel map;
  return map;
}

ByteLevel::ByteLevel() {
  cp_to_byte_.fill(-1);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const uint32_t cp = printable ? b : next++;
    byte_to_cp_[b] = cp;
    byte_utf8_[b] = unicode::to_utf8(cp);
    cp_to_byte_[cp] = static_cast<int16_t>(b);
  }
}

std::string ByteLevel::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += byte_utf8_[c];
  return out;
}

std::string ByteLevel::decode(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = unicode::decode_utf8(text.data() + i, text.size() - i);
    const int b = c.valid ? byte_from_cp(c.cp) : -1;
    if (b >= 0) out.push_back(static_cast<char>(b));
    else out.append(text.substr(i, c.len));
    i += c.len;
  }
  return out;
}

}  // namespace fish
