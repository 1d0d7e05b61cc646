// The Python methods templates call on values: str (strip, split, startswith,
// replace, format, ...), dict (items, keys, values, get) and list (index,
// count). Mutating methods exist in Python but the sandbox refuses them; a
// Python method fish does not implement is an error that names it, never a
// silent Undefined.
#pragma once
#include <string>

#include "chat/jinja_value.h"

namespace fish::chat::jinja {

enum class MethodKind { None, Safe, Unsafe, Unsupported };

// Whether obj.name is a method, and whether it may be called.
MethodKind method_kind(const Value& obj, const std::string& name);
// Calls obj.name(args); obj.name must be a Safe method.
Value call_method(const Value& obj, const std::string& name, CallArgs& args);
// obj.name as a value (a callable bound to obj), for `x.strip` without a call.
Value bound_method(const Value& obj, const std::string& name);

}  // namespace fish::chat::jinja
