// Unicode lookups and UTF-8 coding (see unicode.h).
#include "tokenizer/unicode.h"

#include <map>

namespace fish::unicode {

bool category_mask_from_name(std::string_view name, uint32_t& mask) {
  struct Named { const char* name; uint32_t mask; };
  static const Named kNames[] = {
      {"L", kMaskL}, {"M", kMaskM}, {"N", kMaskN}, {"P", kMaskP}, {"S", kMaskS}, {"Z", kMaskZ}, {"C", kMaskC},
      {"Lu", cat_bit(Category::Lu)}, {"Ll", cat_bit(Category::Ll)}, {"Lt", cat_bit(Category::Lt)},
      {"Lm", cat_bit(Category::Lm)}, {"Lo", cat_bit(Category::Lo)},
      {"Mn", cat_bit(Category::Mn)}, {"Mc", cat_bit(Category::Mc)}, {"Me", cat_bit(Category::Me)},
      {"Nd", cat_bit(Category::Nd)}, {"Nl", cat_bit(Category::Nl)}, {"No", cat_bit(Category::No)},
      {"Pc", cat_bit(Category::Pc)}, {"Pd", cat_bit(Category::Pd)}, {"Ps", cat_bit(Category::Ps)},
      {"Pe", cat_bit(Category::Pe)}, {"Pi", cat_bit(Category::Pi)}, {"Pf", cat_bit(Category::Pf)},
      {"Po", cat_bit(Category::Po)},
      {"Sm", cat_bit(Category::Sm)}, {"Sc", cat_bit(Category::Sc)}, {"Sk", cat_bit(Category::Sk)},
      {"So", cat_bit(Category::So)},
      {"Zs", cat_bit(Category::Zs)}, {"Zl", cat_bit(Category::Zl)}, {"Zp", cat_bit(Category::Zp)},
      {"Cc", cat_bit(Category::Cc)}, {"Cf", cat_bit(Category::Cf)}, {"Cs", cat_bit(Category::Cs)},
      {"Co", cat_bit(Category::Co)}, {"Cn", cat_bit(Category::Cn)},
      // Long names as Oniguruma/PCRE accept them.
      {"Letter", kMaskL}, {"Mark", kMaskM}, {"Number", kMaskN}, {"Punctuation", kMaskP},
      {"Symbol", kMaskS}, {"Separator", kMaskZ}, {"Other", kMaskC},
  };
  for (const auto& n : kNames) {
    if (name == n.name) {
      mask = n.mask;
      return true;
    }
  }
  return false;
}

const CodepointInfo& CodepointInfo::get() {
  static const CodepointInfo table;
  return table;
}

CodepointInfo::CodepointInfo() {
  // Flat info for every code point first (1.1 MB, temporary), then share equal
  // 256-code-point blocks: most of the code space is a few repeated blocks.
  std::vector<uint8_t> flat(size_t(kMaxCodepoint) + 1, static_cast<uint8_t>(Category::Cn));
  for (size_t i = 0; i < kCategoryRangeCount; ++i) {
    const auto& r = kCategoryRanges[i];
    for (uint32_t cp = r.first; cp <= r.last; ++cp) flat[cp] = static_cast<uint8_t>(r.cat);
  }
  for (size_t i = 0; i < kWhiteSpaceRangeCount; ++i) {
    const auto& r = kWhiteSpaceRanges[i];
    for (uint32_t cp = r.first; cp <= r.last; ++cp) flat[cp] |= kSpaceBit;
  }
  const size_t n_blocks = (size_t(kMaxCodepoint) + 1) / 256;
  stage1_.resize(n_blocks);
  std::map<std::string, uint16_t> seen;
  for (size_t b = 0; b < n_blocks; ++b) {
    std::string key(reinterpret_cast<const char*>(flat.data() + b * 256), 256);
    auto it = seen.find(key);
    if (it == seen.end()) {
      const auto idx = static_cast<uint16_t>(seen.size());
      it = seen.emplace(std::move(key), idx).first;
      blocks_.insert(blocks_.end(), flat.begin() + long(b * 256), flat.begin() + long(b * 256 + 256));
    }
    stage1_[b] = it->second;
  }
}

Utf8Char decode_utf8(const char* s, size_t n) {
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  const uint32_t b0 = u[0];
  if (b0 < 0x80) return {b0, 1, true};
  uint32_t len = 0, cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) { len = 2; cp = b0 & 0x1F; min = 0x80; }
  else if ((b0 & 0xF0) == 0xE0) { len = 3; cp = b0 & 0x0F; min = 0x800; }
  else if ((b0 & 0xF8) == 0xF0) { len = 4; cp = b0 & 0x07; min = 0x10000; }
  else return {kReplacement, 1, false};  // continuation byte or 0xF8..0xFF as a lead
  if (n < len) return {kReplacement, 1, false};
  for (uint32_t i = 1; i < len; ++i) {
    if ((u[i] & 0xC0) != 0x80) return {kReplacement, 1, false};
    cp = (cp << 6) | (u[i] & 0x3F);
  }
  if (cp < min || cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) return {kReplacement, 1, false};
  return {cp, len, true};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_utf8(uint32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

void decode_utf8_all(std::string_view text, std::vector<uint32_t>& cps, std::vector<uint32_t>& offsets) {
  cps.clear();
  offsets.clear();
  cps.reserve(text.size());
  offsets.reserve(text.size() + 1);
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {  // ASCII fast path
      cps.push_back(b);
      offsets.push_back(static_cast<uint32_t>(i));
      ++i;
      continue;
    }
    const Utf8Char c = decode_utf8(text.data() + i, text.size() - i);
    cps.push_back(c.cp);
    offsets.push_back(static_cast<uint32_t>(i));
    i += c.len;
  }
  offsets.push_back(static_cast<uint32_t>(text.size()));
}

}  // namespace fish::unicode
