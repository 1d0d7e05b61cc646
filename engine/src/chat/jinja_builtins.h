// The built-in filters (x | name(args)) and tests (x is name(args)) of jinja2
// that chat templates use, with jinja2's semantics, plus Hugging Face's
// `tojson` (Python's json.dumps, see jinja_json.h). An unknown name is a
// runtime error naming it.
#pragma once
#include <string>

#include "chat/jinja_value.h"

namespace fish::chat::jinja {

bool has_filter(const std::string& name);
Value apply_filter(const std::string& name, const Value& input, CallArgs& args);

bool has_test(const std::string& name);
bool apply_test(const std::string& name, const Value& input, CallArgs& args);

// "a.b.0" as jinja2's attribute getter reads it: item first, then attribute,
// digits as indices (used by map, selectattr, sort, join, ... `attribute=`).
Value attribute_path(const Value& v, const std::string& path);

}  // namespace fish::chat::jinja
