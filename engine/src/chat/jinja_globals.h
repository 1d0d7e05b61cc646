// The global functions a chat template can call, as Hugging Face's
// environment provides them: range, dict, namespace, raise_exception,
// strftime_now (with the time fixed by the caller when it wants to).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_strftime.h"
#include "chat/jinja_value.h"

namespace fish::chat::jinja {

// range() refuses more items than this, as jinja2's sandbox does (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

std::vector<std::pair<std::string, Value>> make_globals(const std::optional<DateTime>& now);

// True when v is or holds a namespace (a namespace may not hold one: that is
// how reference cycles, and unbounded nesting, are kept out).
bool holds_namespace(const Value& v);

}  // namespace fish::chat::jinja
