#include "spec/vocab_match.h"

#include <algorithm>
#include <cstdint>

namespace fish::spec {

namespace {

// Printable and short, for a message: control bytes as \xNN, at most 24 bytes.
std::string shown(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 24; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  if (s.size() > 24) out += "...";
  return out;
}

}  // namespace

std::string vocab_mismatch(const SpecModel& target, const SpecModel& draft) {
  const int32_t nt = target.n_vocab(), nd = draft.n_vocab();
  if (nt != nd) return "n_vocab " + std::to_string(nt) + " in the target, " + std::to_string(nd) + " in the draft";
  if (target.bos() != draft.bos())
    return "BOS is token " + std::to_string(target.bos()) + " in the target, " + std::to_string(draft.bos()) +
           " in the draft";
  if (target.eos() != draft.eos())
    return "EOS is token " + std::to_string(target.eos()) + " in the target, " + std::to_string(draft.eos()) +
           " in the draft";
  auto differs = [&](int32_t id) {
    const std::string a = target.token_text(id), b = draft.token_text(id);
    return a == b ? std::string()
                  : "token " + std::to_string(id) + " is '" + shown(a) + "' in the target and '" + shown(b) +
                        "' in the draft";
  };
  for (int32_t id = 0; id < std::min<int32_t>(nt, 64); ++id)
    if (std::string why = differs(id); !why.empty()) return why;
  for (int32_t k = 0; k < 192 && nt > 64; ++k) {
    const int32_t id = 64 + int32_t(int64_t(nt - 65) * k / 191);
    if (std::string why = differs(id); !why.empty()) return why;
  }
  return "";
}

}  // namespace fish::spec
