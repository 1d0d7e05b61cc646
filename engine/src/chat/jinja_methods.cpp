// Python methods of str, dict, list and tuple (see jinja_methods.h).
#include "chat/jinja_methods.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "chat/jinja_args.h"
#include "chat/jinja_format.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_pystr.h"

namespace fish::chat::jinja {

namespace {

bool in_list(const std::string& name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Every method of Python's str, so that one fish lacks is reported by name.
const std::initializer_list<std::string_view> kPyStrMethods = {
    "capitalize", "casefold",  "center",     "count",     "encode",     "endswith",     "expandtabs",
    "find",       "format",    "format_map", "index",     "isalnum",    "isalpha",      "isascii",
    "isdecimal",  "isdigit",   "isidentifier", "islower", "isnumeric",  "isprintable",  "isspace",
    "istitle",    "isupper",   "join",       "ljust",     "lower",      "lstrip",       "maketrans",
    "partition",  "removeprefix", "removesuffix", "replace", "rfind",   "rindex",       "rjust",
    "rpartition", "rsplit",    "rstrip",     "split",     "splitlines", "startswith",   "strip",
    "swapcase",   "title",     "translate",  "upper",     "zfill"};

const std::initializer_list<std::string_view> kStrMethods = {
    "capitalize", "casefold", "center",  "count",     "endswith", "find",       "format",     "index",
    "isalnum",    "isalpha",  "isascii", "isdecimal", "isdigit",  "islower",    "isnumeric",  "isspace",
    "isupper",    "join",     "ljust",   "lower",     "lstrip",   "partition",  "removeprefix", "removesuffix",
    "replace",    "rfind",    "rindex",  "rjust",     "rpartition", "rsplit",   "rstrip",     "split",
    "splitlines", "startswith", "strip", "swapcase",  "title",    "upper",      "zfill"};

std::optional<std::string> opt_str(const Params& p, size_t i) {
  if (p.absent(i)) return std::nullopt;
  return p.str_arg(i, "");
}

Value str_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& s : parts) out.emplace_back(std::move(s));
  return Value::list(std::move(out));
}

// startswith / endswith take a string or a tuple of strings.
bool affix(const std::string& s, const Value& what, bool start, const std::string& fn) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) runtime_error(fn + " first arg must be str or a tuple of str, not " + v.type_name());
    const std::string& a = v.get_string();
    if (a.size() > s.size()) return false;
    return start ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (what.is_tuple()) {
    for (const Value& v : what.items())
      if (one(v)) return true;
    return false;
  }
  return one(what);
}

std::string justify(const std::string& s, const Params& p, char how) {
  const int64_t width = p.int_arg(0, 0);
  const std::string fill = p.str_arg(1, " ");
  if (pystr::length(fill) != 1) runtime_error("The fill character must be exactly one character long");
  const int64_t n = int64_t(pystr::length(s));
  if (width <= n) return s;
  check_string_size(size_t(width) * fill.size());
  const int64_t extra = width - n;
  auto fills = [&](int64_t k) {
    std::string f;
    for (int64_t i = 0; i < k; ++i) f += fill;
    return f;
  };
  if (how == '<') return s + fills(extra);
  if (how == '>') return fills(extra) + s;
  // Python's center puts the odd space on the left when the width is odd... and n even.
  const int64_t left = extra / 2 + (extra & width & 1);
  return fills(left) + s + fills(extra - left);
}

Value str_method(const std::string& s, const std::string& name, CallArgs& a) {
  const std::string fn = "str." + name + "()";
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Params p(a, fn, {"chars"});
    return Value(pystr::strip(s, opt_str(p, 0), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Params p(a, fn, {"sep", "maxsplit"});
    const auto sep = opt_str(p, 0);
    const int64_t maxsplit = p.int_arg(1, -1);
    return str_list(name == "split" ? pystr::split(s, sep, maxsplit) : pystr::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    Params p(a, fn, {"keepends"});
    return str_list(pystr::splitlines(s, p.bool_arg(0, false)));
  }
  if (name == "startswith" || name == "endswith") {
    Params p(a, fn, {"prefix", "start", "end"});
    if (!p.has(0)) runtime_error(fn + " takes at least 1 argument");
    if (p.has(1) || p.has(2)) {
      const Value sub = slice(Value(s), p.get_or(1, Value::none()), p.get_or(2, Value::none()), Value::none());
      return Value(affix(sub.get_string(), p.get(0), name == "startswith", fn));
    }
    return Value(affix(s, p.get(0), name == "startswith", fn));
  }
  if (name == "upper") return no_args(a, fn), Value(pystr::upper(s));
  if (name == "lower" || name == "casefold") return no_args(a, fn), Value(pystr::lower(s));
  if (name == "title") return no_args(a, fn), Value(pystr::title(s));
  if (name == "capitalize") return no_args(a, fn), Value(pystr::capitalize(s));
  if (name == "swapcase") return no_args(a, fn), Value(pystr::swapcase(s));
  if (name == "replace") {
    Params p(a, fn, {"old", "new", "count"});
    if (!p.has(0) || !p.has(1)) runtime_error(fn + " takes at least 2 arguments");
    std::string out = pystr::replace(s, p.str_arg(0, ""), p.str_arg(1, ""), p.int_arg(2, -1));
    check_string_size(out.size());
    return Value(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Params p(a, fn, {"sub"});
    if (!p.has(0)) runtime_error(fn + " takes exactly one argument");
    const std::string sub = p.str_arg(0, "");
    if (name == "count") return Value(pystr::count(s, sub));
    const int64_t at = (name == "find" || name == "index") ? pystr::find(s, sub) : pystr::rfind(s, sub);
    if (at < 0 && (name == "index" || name == "rindex")) runtime_error("substring not found");
    return Value(at);
  }
  if (name == "join") {
    Params p(a, fn, {"iterable"});
    std::string out;
    size_t i = 0;
    for (const Value& v : iterate(p.get(0))) {
      if (!v.is_string())
        runtime_error("sequence item " + std::to_string(i) + ": expected str instance, " + v.type_name() + " found");
      if (i++) out += s;
      out += v.get_string();
      check_string_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(str_format(s, a));
  if (name == "center" || name == "ljust" || name == "rjust") {
    Params p(a, fn, {"width", "fillchar"});
    return Value(justify(s, p, name == "center" ? '^' : (name == "ljust" ? '<' : '>')));
  }
  if (name == "zfill") {
    Params p(a, fn, {"width"});
    const int64_t width = p.int_arg(0, 0);
    const int64_t n = int64_t(pystr::length(s));
    if (width <= n) return Value(s);
    check_string_size(size_t(width));
    const size_t at = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    std::string out = s;
    out.insert(at, size_t(width - n), '0');
    return Value(std::move(out));
  }
  if (name == "partition" || name == "rpartition") {
    Params p(a, fn, {"sep"});
    const std::string sep = p.str_arg(0, "");
    if (sep.empty()) runtime_error("empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                 : Value::tuple({Value(""), Value(""), Value(s)});
    return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Params p(a, fn, {"affix"});
    const std::string x = p.str_arg(0, "");
    if (name == "removeprefix") return Value(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    if (x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value(s.substr(0, s.size() - x.size()));
    return Value(s);
  }
  no_args(a, fn);
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
    return Value(pystr::all_of(s, pystr::is_digit_cp));
  if (name == "isalpha") return Value(pystr::all_of(s, pystr::is_alpha_cp));
  if (name == "isalnum") return Value(pystr::all_of(s, pystr::is_alnum_cp));
  if (name == "isspace") return Value(pystr::all_of(s, pystr::is_space));
  if (name == "isupper") return Value(pystr::is_upper(s));
  if (name == "islower") return Value(pystr::is_lower(s));
  if (name == "isascii")
    return Value(std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
  runtime_error("the str method '" + name + "' is not supported by fish's template engine");
}

Value dict_method(const Value& obj, const std::string& name, CallArgs& a) {
  const std::string fn = "dict." + name + "()";
  const DictData& d = obj.dict();
  if (name == "get") {
    Params p(a, fn, {"key", "default"});
    if (!p.has(0)) runtime_error("get expected at least 1 argument, got 0");
    const Value* v = d.find(p.get(0));
    return v ? *v : p.get_or(1, Value::none());
  }
  no_args(a, fn);
  if (name == "copy") return obj;
  std::vector<Value> out;
  out.reserve(d.size());
  for (const auto& [k, v] : d.entries) {
    if (name == "items") out.push_back(Value::tuple({k, v}));
    else if (name == "keys") out.push_back(k);
    else out.push_back(v);
  }
  return Value::list(std::move(out));
}

Value list_method(const Value& obj, const std::string& name, CallArgs& a) {
  const std::string fn = obj.type_name() + "." + name + "()";
  if (name == "copy") return no_args(a, fn), obj;
  Params p(a, fn, {"value"});
  if (!p.has(0)) runtime_error(fn + " takes exactly one argument");
  const auto& items = obj.items();
  if (name == "count")
    return Value(int64_t(
        std::count_if(items.begin(), items.end(), [&](const Value& v) { return equals(v, p.get(0)); })));
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], p.get(0))) return Value(int64_t(i));
  runtime_error(repr(p.get(0)) + " is not in " + obj.type_name());
}

}  // namespace

MethodKind method_kind(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    if (in_list(name, kStrMethods)) return MethodKind::Safe;
    if (in_list(name, kPyStrMethods)) return MethodKind::Unsupported;
    return MethodKind::None;
  }
  if (obj.is_dict()) {
    if (in_list(name, {"items", "keys", "values", "get", "copy"})) return MethodKind::Safe;
    if (in_list(name, {"pop", "popitem", "setdefault", "update", "clear"})) return MethodKind::Unsafe;
    return MethodKind::None;
  }
  if (obj.is_list()) {
    if (in_list(name, {"index", "count"})) return MethodKind::Safe;
    if (!obj.is_tuple()) {
      if (name == "copy") return MethodKind::Safe;
      if (in_list(name, {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}))
        return MethodKind::Unsafe;
    }
  }
  return MethodKind::None;
}

Value call_method(const Value& obj, const std::string& name, CallArgs& args) {
  if (obj.is_string()) return str_method(obj.get_string(), name, args);
  if (obj.is_dict()) return dict_method(obj, name, args);
  return list_method(obj, name, args);
}

Value bound_method(const Value& obj, const std::string& name) {
  return Value::function(obj.type_name() + "." + name, [obj, name](CallArgs& a) { return call_method(obj, name, a); });
}

}  // namespace fish::chat::jinja
