// JSON in and out of jinja::Value.
//
// parse_json reads a conversation (messages, tools) keeping what the templates
// print: object keys in file order, 1 and 1.0 as int and float. It accepts
// Python's NaN / Infinity / -Infinity as json.loads does. (A parser of our own
// rather than nlohmann-json, which Debian packages but the build does not yet
// need: the text goes straight into jinja::Value with these properties, and the
// nesting bound is checked before recursing.)
//
// to_json is Python's json.dumps(x, ensure_ascii=..., indent=..., separators=...,
// sort_keys=...), which is what Hugging Face's `tojson` filter calls (not
// Jinja's own tojson, which would HTML-escape < > & '). Its text is part of the
// rendered prompt, so every separator and escape matches Python's.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "chat/jinja_value.h"

namespace fish::chat::jinja {

// Input nesting is bounded below kMaxValueDepth, leaving the template room to
// wrap input values in lists and dicts of its own.
constexpr int kMaxJsonDepth = kMaxValueDepth - 56;

// Throws fish::Error "invalid JSON at line L, column C: reason".
Value parse_json(std::string_view text);

struct JsonOptions {
  std::optional<std::string> indent;  // nullopt: one line; else the text of one level ("    " for indent=4)
  std::string item_sep = ", ";        // Python's defaults: ", " on one line, "," with an indent
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Throws a runtime jinja::Error for what json.dumps refuses (Undefined, a
// namespace, a function, a dict key that is a list).
std::string to_json(const Value& v, const JsonOptions& options = {});

}  // namespace fish::chat::jinja
