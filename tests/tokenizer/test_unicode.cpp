// Unicode data (generated from Debian's unicode-data, Unicode 15.0) and UTF-8.
#include <catch2/catch.hpp>

#include "tokenizer/unicode.h"

using namespace fish::unicode;

TEST_CASE("unicode: general categories of known code points", "[tokenizer][unicode]") {
  struct Known { uint32_t cp; Category cat; };
  const Known known[] = {
      {'A', Category::Lu},     {'z', Category::Ll},     {'5', Category::Nd},     {0xBD, Category::No},   // ½
      {0x2164, Category::Nl},  {'!', Category::Po},     {'_', Category::Pc},     {'-', Category::Pd},
      {'(', Category::Ps},     {')', Category::Pe},     {0xAB, Category::Pi},    {0xBB, Category::Pf},
      {'+', Category::Sm},     {'$', Category::Sc},     {'^', Category::Sk},     {0xA9, Category::So},
      {' ', Category::Zs},     {0x2028, Category::Zl},  {0x2029, Category::Zp},  {'\n', Category::Cc},
      {0x200D, Category::Cf},  {0xD800, Category::Cs},  {0xE000, Category::Co},  {0x0378, Category::Cn},
      {0x0301, Category::Mn},  {0x17B6, Category::Mc},  {0x20DD, Category::Me},  {0x01C5, Category::Lt},
      {0x02B0, Category::Lm},  {0x4E00, Category::Lo},  {0x9FFF, Category::Lo},  {0xAC00, Category::Lo},
      {0x1780, Category::Lo},  {0x17CB, Category::Mn},  {0xFE0F, Category::Mn},  {0x1F999, Category::So},
      {0x1F680, Category::So}, {0x10FFFF, Category::Cn}, {0x110000, Category::Cn},
      {0x31350, Category::Lo},  // CJK Extension H, new in Unicode 15.0
      {0x11F00, Category::Mn},  // Kawi, new in Unicode 15.0
  };
  for (const auto& k : known) {
    INFO("U+" << std::hex << k.cp);
    CHECK(int(category(k.cp)) == int(k.cat));
  }
  CHECK(is_letter(0x00C4));  // Ä
  CHECK(!is_letter(0x17B6));  // Khmer vowel sign: a mark, not a letter
  CHECK(is_number(0x0663));   // Arabic-Indic three
  CHECK(!is_number('x'));
}

TEST_CASE("unicode: White_Space property", "[tokenizer][unicode]") {
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                      0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
    CHECK(is_white_space(cp));
  for (uint32_t cp : {0x08u, 0x1Cu, 0x1Fu, 0x200Bu, 0x180Eu, 0xFEFFu, uint32_t('a'), 0x2060u})
    CHECK(!is_white_space(cp));
}

TEST_CASE("unicode: category counts match Unicode 15.0", "[tokenizer][unicode]") {
  // Per-category code point totals published for Unicode 15.0
  // (DerivedGeneralCategory.txt): Nd 680, Lu 1831, Ll 2233, Zs 17, Cs 2048, Co 137468.
  size_t nd = 0, lu = 0, ll = 0, zs = 0, cs = 0, co = 0;
  for (uint32_t cp = 0; cp <= kMaxCodepoint; ++cp) {
    switch (category(cp)) {
      case Category::Nd: ++nd; break;
      case Category::Lu: ++lu; break;
      case Category::Ll: ++ll; break;
      case Category::Zs: ++zs; break;
      case Category::Cs: ++cs; break;
      case Category::Co: ++co; break;
      default: break;
    }
  }
  CHECK(nd == 680);
  CHECK(lu == 1831);
  CHECK(ll == 2233);
  CHECK(zs == 17);
  CHECK(cs == 2048);
  CHECK(co == 137468);
}

TEST_CASE("unicode: UTF-8 decoding is strict, invalid bytes count one each", "[tokenizer][unicode]") {
  auto dec = [](const std::string& s) { return decode_utf8(s.data(), s.size()); };
  auto c = dec("\xF0\x9F\xA6\x99");  // U+1F999
  CHECK(c.valid);
  CHECK(c.cp == 0x1F999);
  CHECK(c.len == 4);
  c = dec("\xC3\x84");
  CHECK((c.valid && c.cp == 0xC4 && c.len == 2));
  for (const std::string& bad : {std::string("\xC0\x80"), std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80"),
                                std::string("\xE2\x82"), std::string("\x80"), std::string("\xFF"),
                                std::string("\xE0\x80\xAF")}) {
    c = dec(bad);
    CHECK(!c.valid);
    CHECK(c.len == 1);
    CHECK(c.cp == kReplacement);
  }
  std::vector<uint32_t> cps, offs;
  decode_utf8_all("a\xC3\x84\xFF" "b", cps, offs);
  CHECK(cps == std::vector<uint32_t>{'a', 0xC4, kReplacement, 'b'});
  CHECK(offs == std::vector<uint32_t>{0, 1, 3, 4, 5});
  for (uint32_t cp : {0x41u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    const std::string s = to_utf8(cp);
    c = decode_utf8(s.data(), s.size());
    CHECK((c.valid && c.cp == cp && c.len == s.size()));
  }
}

TEST_CASE("unicode: generated tables are sorted and disjoint", "[tokenizer][unicode]") {
  REQUIRE(kCategoryRangeCount > 3000);
  for (size_t i = 0; i < kCategoryRangeCount; ++i) {
    CHECK(kCategoryRanges[i].first <= kCategoryRanges[i].last);
    CHECK(kCategoryRanges[i].last <= kMaxCodepoint);
    if (i) CHECK(kCategoryRanges[i - 1].last < kCategoryRanges[i].first);
  }
  for (size_t i = 1; i < kWhiteSpaceRangeCount; ++i) CHECK(kWhiteSpaceRanges[i - 1].last < kWhiteSpaceRanges[i].first);
}
