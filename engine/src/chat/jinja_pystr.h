// Python's str operations on UTF-8 text, as chat templates call them
// (content.strip(), .split('</think>'), |trim, |title, len(), s[1:-1], repr).
//
// Python strings are sequences of code points, so lengths, indices and slices
// count code points, not bytes. Whitespace is Python's: Unicode White_Space
// plus U+001C..U+001F. Case mapping covers ASCII, Latin-1, Greek and Cyrillic
// (what a role name or a tool name can hold); other letters pass unchanged.
// Bytes that are not valid UTF-8 count as one character each and are kept.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fish::chat::jinja::pystr {

// Byte offset of each code point of s, plus s.size() at the end.
std::vector<size_t> offsets(std::string_view s);
size_t length(std::string_view s);  // in code points

bool is_space(uint32_t cp);
bool is_printable(uint32_t cp);  // str.isprintable() of one character

// str.strip / lstrip / rstrip: whitespace, or any code point of `chars`.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1) and str.rsplit. An empty `sep` is Python's
// ValueError (thrown as a runtime error).
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);        // str.title()
std::string capitalize(std::string_view s);   // str.capitalize()
std::string jinja_title(std::string_view s);  // the |title filter (words split at -, space, ( { [ <)
std::string swapcase(std::string_view s);

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
// str.find / rfind / count over the whole string; indices in code points.
int64_t find(std::string_view s, std::string_view sub);
int64_t rfind(std::string_view s, std::string_view sub);
int64_t count(std::string_view s, std::string_view sub);

// Predicates over every character (false for ""), as Python's is* methods.
bool all_of(std::string_view s, bool (*pred)(uint32_t));
bool is_alpha_cp(uint32_t cp);
bool is_digit_cp(uint32_t cp);
bool is_alnum_cp(uint32_t cp);
bool is_upper_cp(uint32_t cp);
bool is_lower_cp(uint32_t cp);
bool is_cased_cp(uint32_t cp);
// str.isupper(): at least one cased character and no lowercase one (islower alike).
bool is_upper(std::string_view s);
bool is_lower(std::string_view s);

// repr(str): single quotes unless the text has ' and no ", escapes as Python.
std::string repr(std::string_view s);

}  // namespace fish::chat::jinja::pystr
