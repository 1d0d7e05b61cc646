// Unicode data for the tokenizers: general categories, the White_Space property
// and UTF-8 decoding/encoding. The data comes from unicode_tables.cpp, which
// gen_unicode_tables.py generates from Debian's unicode-data (Unicode 15.0).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fish::unicode {

// Unicode general categories; Cn (unassigned) is 0. The order is the
// generator's CATEGORIES list: keep them in step.
enum class Category : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No,
  Pc, Pd, Ps, Pe, Pi, Pf, Po, Sm, Sc, Sk, So,
  Zs, Zl, Zp, Cc, Cf, Cs, Co,
};
constexpr int kCategoryCount = 30;

struct CategoryRange { uint32_t first, last; Category cat; };
struct CodepointRange { uint32_t first, last; };

// Generated tables (unicode_tables.cpp).
extern const CategoryRange kCategoryRanges[];
extern const size_t kCategoryRangeCount;
extern const CodepointRange kWhiteSpaceRanges[];
extern const size_t kWhiteSpaceRangeCount;

constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr uint32_t kReplacement = 0xFFFD;  // stands for an invalid UTF-8 byte

// A set of categories as a bit mask: bit (1u << int(Category)).
constexpr uint32_t cat_bit(Category c) { return 1u << static_cast<int>(c); }
constexpr uint32_t kMaskL = cat_bit(Category::Lu) | cat_bit(Category::Ll) | cat_bit(Category::Lt) |
                            cat_bit(Category::Lm) | cat_bit(Category::Lo);
constexpr uint32_t kMaskM = cat_bit(Category::Mn) | cat_bit(Category::Mc) | cat_bit(Category::Me);
constexpr uint32_t kMaskN = cat_bit(Category::Nd) | cat_bit(Category::Nl) | cat_bit(Category::No);
constexpr uint32_t kMaskP = cat_bit(Category::Pc) | cat_bit(Category::Pd) | cat_bit(Category::Ps) |
                            cat_bit(Category::Pe) | cat_bit(Category::Pi) | cat_bit(Category::Pf) |
                            cat_bit(Category::Po);
constexpr uint32_t kMaskS = cat_bit(Category::Sm) | cat_bit(Category::Sc) | cat_bit(Category::Sk) |
                            cat_bit(Category::So);
constexpr uint32_t kMaskZ = cat_bit(Category::Zs) | cat_bit(Category::Zl) | cat_bit(Category::Zp);
constexpr uint32_t kMaskC = cat_bit(Category::Cn) | cat_bit(Category::Cc) | cat_bit(Category::Cf) |
                            cat_bit(Category::Cs) | cat_bit(Category::Co);
constexpr uint32_t kMaskAll = (1u << kCategoryCount) - 1;

// The mask for a \p{...} name: one- or two-letter category abbreviations
// ("L", "Lu", "N", "Nd", "P", ...). Returns false for an unknown name.
bool category_mask_from_name(std::string_view name, uint32_t& mask);

// Per-code-point info byte: bits 0-4 the Category, bit 5 White_Space. Built once
// (first use, thread-safe) as a two-stage table: stage1[cp >> 8] selects a
// 256-byte block of stage2. Lookups are two loads.
class CodepointInfo {
 public:
  static constexpr uint8_t kSpaceBit = 0x20;
  static const CodepointInfo& get();

  uint8_t info(uint32_t cp) const {
    if (cp > kMaxCodepoint) return static_cast<uint8_t>(Category::Cn);
    return blocks_[size_t(stage1_[cp >> 8]) * 256 + (cp & 0xFF)];
  }
  Category category(uint32_t cp) const { return static_cast<Category>(info(cp) & 0x1F); }
  bool is_space(uint32_t cp) const { return (info(cp) & kSpaceBit) != 0; }

 private:
  CodepointInfo();
  std::vector<uint16_t> stage1_;  // [0x1100]
  std::vector<uint8_t> blocks_;   // [n_unique_blocks * 256]
};

inline Category category(uint32_t cp) { return CodepointInfo::get().category(cp); }
inline bool is_white_space(uint32_t cp) { return CodepointInfo::get().is_space(cp); }
inline bool is_letter(uint32_t cp) { return (cat_bit(category(cp)) & kMaskL) != 0; }
inline bool is_number(uint32_t cp) { return (cat_bit(category(cp)) & kMaskN) != 0; }

// --- UTF-8 ---

// Decodes the code point at s[0..n): its value and byte length. An invalid or
// truncated sequence (overlong, surrogate, > U+10FFFF, stray continuation byte)
// counts as one byte with value kReplacement, so that no input byte is lost.
struct Utf8Char { uint32_t cp; uint32_t len; bool valid; };
Utf8Char decode_utf8(const char* s, size_t n);

void append_utf8(std::string& out, uint32_t cp);
std::string to_utf8(uint32_t cp);

// Code points of `text` and, for each, its byte offset (offsets has one extra
// entry: text.size()). Invalid bytes become kReplacement, one per byte.
void decode_utf8_all(std::string_view text, std::vector<uint32_t>& cps, std::vector<uint32_t>& offsets);

}  // namespace fish::unicode
