// Python's string formatting, as the |format filter, the % operator and
// str.format() do it: printf-style "%s %d %.2f %(name)s" and the format mini
// language "{0} {name!r:>10} {:.3f}".
#pragma once
#include <string>
#include <string_view>

#include "chat/jinja_value.h"

namespace fish::chat::jinja {

// fmt % args: a tuple supplies the positional arguments, a dict the named
// ones, any other value is the single argument.
std::string percent_format(const std::string& fmt, const Value& args);
// fmt.format(*args, **kwargs).
std::string str_format(const std::string& fmt, const CallArgs& args);
// format(v, spec): [[fill]align][sign][#][0][width][,|_][.precision][type].
std::string format_value(const Value& v, std::string_view spec);

}  // namespace fish::chat::jinja
