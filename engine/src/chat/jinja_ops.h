// The object protocol and operators of the template language, with the
// behaviour of jinja2's sandboxed environment over Python objects:
//  - x.name tries the attribute first (a dict's items/keys/values/get, a
//    string's methods, a namespace's members), then the key; x[key] the key
//    first, then the attribute. A miss is Undefined, not an error (so that
//    `message.tool_calls is defined` works); using that Undefined is the error.
//  - mutating methods (list.append, dict.update, ...) are refused, as the
//    ImmutableSandboxedEnvironment that Hugging Face renders with refuses them.
//  - arithmetic, `in` and slicing follow Python (int/float, floor division and
//    modulo with the sign of the divisor, code point slicing of strings).
#pragma once
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace fish::chat::jinja {

// Longest string a template may build (concatenation, repetition, output).
constexpr size_t kMaxStringBytes = size_t(256) << 20;

Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; absent bounds are None.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// What `for x in v` walks: list/tuple items, dict keys, string characters,
// nothing for Undefined; anything else is a TypeError.
std::vector<Value> iterate(const Value& v);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);
// + - * / // % ** and ~ ("~" joins the str() of both sides).
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);
// Calls a function value (an Undefined or a non-callable is the error).
Value call_value(const Value& fn, CallArgs& args);
// Throws when a string would exceed kMaxStringBytes.
void check_string_size(size_t bytes);

}  // namespace fish::chat::jinja
