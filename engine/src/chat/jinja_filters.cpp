// jinja2's built-in filters, and Hugging Face's tojson (see jinja_builtins.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "chat/jinja_args.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_format.h"
#include "chat/jinja_json.h"
#include "chat/jinja_methods.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_pystr.h"

namespace fish::chat::jinja {

namespace {

using FilterFn = std::function<Value(const Value&, CallArgs&)>;

std::string filter_name(const char* n) { return std::string("filter '") + n + "'"; }

// The key a sort, unique, min or max compares: the attribute if asked, and
// lowercased strings unless case_sensitive.
Value sort_key(const Value& v, const std::string& attribute, bool case_sensitive) {
  Value k = attribute.empty() ? v : attribute_path(v, attribute);
  if (!case_sensitive && k.is_string()) return Value(pystr::lower(k.get_string()));
  return k;
}

std::optional<int64_t> parse_py_int(std::string s, int base) {
  // int(str, base): surrounding whitespace, a sign, underscores between digits,
  // and a 0x/0o/0b prefix when it matches the base (or base 0).
  s = pystr::strip(s, std::nullopt, true, true);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    const char p = char(s[i + 1] | 0x20);
    const int pb = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
    if (pb && (base == 0 || base == pb)) {
      base = pb;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  if (i >= s.size()) return std::nullopt;
  uint64_t v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_' && prev_digit && i + 1 < s.size() && s[i + 1] != '_') {
      prev_digit = false;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (c | 0x20) - 'a' + 10;
    if (d < 0 || d >= base) return std::nullopt;
    if (v > (uint64_t(INT64_MAX) - uint64_t(d)) / uint64_t(base)) return std::nullopt;
    v = v * uint64_t(base) + uint64_t(d);
    prev_digit = true;
  }
  if (!prev_digit) return std::nullopt;
  return neg ? -int64_t(v) : int64_t(v);
}

std::optional<double> parse_py_float(const std::string& raw) {
  std::string s = pystr::strip(raw, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(s[i + 1])))
        return std::nullopt;
      continue;
    }
    clean += s[i];
  }
  std::string low = pystr::lower(clean);
  const size_t sign = (!low.empty() && (low[0] == '+' || low[0] == '-')) ? 1 : 0;
  const std::string word = low.substr(sign);
  const double sg = (sign && low[0] == '-') ? -1.0 : 1.0;
  if (word == "inf" || word == "infinity") return sg * HUGE_VAL;
  if (word == "nan") return std::nan("");
  if (clean.empty() || word.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double f = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return f;
}

// Python's round(x, n) for floats: correctly rounded, ties to even on the exact
// binary value, which is what printf's %.*f computes.
double py_round(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n > 300) return x;
  if (n < 0) {
    const double p = std::pow(10.0, double(-n));
    return std::nearbyint(x / p) * p;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", int(n), x);
  return std::strtod(buf, nullptr);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

int64_t length_of(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined: return 0;
    case Value::Type::String: return int64_t(pystr::length(v.get_string()));
    case Value::Type::List: return int64_t(v.items().size());
    case Value::Type::Dict: return int64_t(v.dict().size());
    default: runtime_error("object of type '" + v.type_name() + "' has no len()");
  }
}

// select / reject / selectattr / rejectattr: args after the attribute are the
// test's name and its arguments; no test means truthiness.
Value select_items(const Value& seq, CallArgs& a, bool by_attr, bool keep, const char* name) {
  size_t i = 0;
  std::string attr;
  if (by_attr) {
    if (a.args.empty() || !a.args[0].is_string()) runtime_error(filter_name(name) + " needs an attribute name");
    attr = a.args[0].get_string();
    i = 1;
  }
  std::string test;
  if (i < a.args.size()) {
    if (!a.args[i].is_string()) runtime_error(filter_name(name) + ": the test name must be a string");
    test = a.args[i].get_string();
    ++i;
  }
  CallArgs targs;
  targs.args.assign(a.args.begin() + long(i), a.args.end());
  targs.kwargs = a.kwargs;
  std::vector<Value> out;
  for (const Value& item : iterate(seq)) {
    const Value x = by_attr ? attribute_path(item, attr) : item;
    CallArgs copy = targs;
    const bool ok = test.empty() ? truthy(x) : apply_test(test, x, copy);
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value do_tojson(const Value& v, CallArgs& a) {
  // Hugging Face's signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  Params p(a, "filter 'tojson'", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = p.bool_arg(0, false);
  if (!p.absent(1)) {
    const Value& ind = p.get(1);
    if (ind.is_string()) o.indent = ind.get_string();
    else if (ind.is_int() || ind.is_bool()) o.indent = std::string(size_t(std::max<int64_t>(0, ind.as_int())), ' ');
    else runtime_error("filter 'tojson': indent must be an integer or a string");
    o.item_sep = ",";
  }
  if (!p.absent(2)) {
    const Value& sep = p.get(2);
    if (!sep.is_list() || sep.items().size() != 2 || !sep.items()[0].is_string() || !sep.items()[1].is_string())
      runtime_error("filter 'tojson': separators must be a pair of strings");
    o.item_sep = sep.items()[0].get_string();
    o.key_sep = sep.items()[1].get_string();
  }
  o.sort_keys = p.bool_arg(3, false);
  return Value(to_json(v, o));
}

Value do_indent(const Value& v, CallArgs& a) {
  Params p(a, "filter 'indent'", {"width", "first", "blank"});
  std::string ind;
  const Value w = p.get_or(0, Value(4));
  if (w.is_string()) ind = w.get_string();
  else if (w.is_int() || w.is_bool()) ind = std::string(size_t(std::max<int64_t>(0, w.as_int())), ' ');
  else runtime_error("filter 'indent': width must be an integer or a string");
  const std::string s = to_str(v) + "\n";
  const std::vector<std::string> lines = pystr::splitlines(s, false);
  std::string rv;
  if (p.bool_arg(2, false)) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + ind;
      rv += lines[i];
    }
  } else if (!lines.empty()) {
    rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (p.bool_arg(1, false)) rv = ind + rv;
  check_string_size(rv.size());
  return Value(std::move(rv));
}

Value do_round(const Value& v, CallArgs& a) {
  Params p(a, "filter 'round'", {"precision", "method"});
  const int64_t prec = p.int_arg(0, 0);
  const std::string method = p.str_arg(1, "common");
  if (!v.is_number()) runtime_error("filter 'round' needs a number, not " + v.type_name());
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());
    return Value(py_round(v.get_float(), prec));
  }
  if (method != "ceil" && method != "floor") runtime_error("filter 'round': method must be common, ceil or floor");
  const double scale = std::pow(10.0, double(prec));
  const double x = v.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value do_minmax(const Value& v, CallArgs& a, bool want_max, const char* name) {
  Params p(a, filter_name(name), {"case_sensitive", "attribute"});
  const bool cs = p.bool_arg(0, false);
  const std::string attr = p.str_arg(1, "");
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], attr, cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(items[i], attr, cs);
    const int c = compare(k, best_key, want_max ? ">" : "<");
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value do_sort(const Value& v, CallArgs& a) {
  Params p(a, "filter 'sort'", {"reverse", "case_sensitive", "attribute"});
  const bool rev = p.bool_arg(0, false), cs = p.bool_arg(1, false);
  const std::string attr = p.str_arg(2, "");
  std::vector<Value> items = iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(sort_key(items[i], attr, cs), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first, "<") < 0 : compare(x.first, y.first, "<") < 0;
  });
  std::vector<Value> out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value do_dictsort(const Value& v, CallArgs& a) {
  Params p(a, "filter 'dictsort'", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) runtime_error("filter 'dictsort' needs a dict, not " + v.type_name());
  const bool cs = p.bool_arg(0, false), rev = p.bool_arg(2, false);
  const std::string by = p.str_arg(1, "key");
  if (by != "key" && by != "value") runtime_error("filter 'dictsort': by must be 'key' or 'value'");
  std::vector<std::pair<Value, Value>> e = v.dict().entries;
  auto key = [&](const std::pair<Value, Value>& x) { return sort_key(by == "key" ? x.first : x.second, "", cs); };
  std::stable_sort(e.begin(), e.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(key(y), key(x), "<") < 0 : compare(key(x), key(y), "<") < 0;
  });
  std::vector<Value> out;
  for (auto& [k, x] : e) out.push_back(Value::tuple({k, x}));
  return Value::list(std::move(out));
}

Value do_map(const Value& v, CallArgs& a) {
  std::vector<Value> out;
  std::string attr;
  Value def;
  for (const auto& [k, x] : a.kwargs) {
    if (k == "attribute" && x.is_string()) attr = x.get_string();
    else if (k == "default") def = x;
    else if (k != "attribute") runtime_error("filter 'map' got an unexpected keyword argument '" + k + "'");
  }
  if (!attr.empty()) {
    if (!a.args.empty()) runtime_error("filter 'map': attribute= takes no positional arguments");
    for (const Value& item : iterate(v)) {
      Value x = attribute_path(item, attr);
      out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
    }
    return Value::list(std::move(out));
  }
  if (a.args.empty() || !a.args[0].is_string()) runtime_error("filter 'map' needs a filter name or attribute=");
  const std::string f = a.args[0].get_string();
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  for (const Value& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(apply_filter(f, item, copy));
  }
  return Value::list(std::move(out));
}

Value do_join(const Value& v, CallArgs& a) {
  Params p(a, "filter 'join'", {"d", "attribute"});
  const std::string sep = p.absent(0) ? "" : to_str(p.get(0));
  const std::string attr = p.str_arg(1, "");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attr.empty() ? item : attribute_path(item, attr));
    check_string_size(out.size());
  }
  return Value(std::move(out));
}

Value do_int(const Value& v, CallArgs& a) {
  Params p(a, "filter 'int'", {"default", "base"});
  const Value def = p.get_or(0, Value(0));
  const int64_t base = p.int_arg(1, 10);
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double f = v.get_float();
    if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) return def;
    return Value(int64_t(f));
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.get_string(), int(base))) return Value(*i);
    if (auto f = parse_py_float(v.get_string()))
      if (std::isfinite(*f) && std::fabs(*f) < 9.2e18) return Value(int64_t(*f));
  }
  return def;
}

Value do_float(const Value& v, CallArgs& a) {
  Params p(a, "filter 'float'", {"default"});
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string())
    if (auto f = parse_py_float(v.get_string())) return Value(*f);
  return p.get_or(0, Value(0.0));
}

Value do_format(const Value& v, CallArgs& a) {
  if (!a.args.empty() && !a.kwargs.empty())
    runtime_error("filter 'format' can't handle positional and keyword arguments at the same time");
  if (!a.kwargs.empty()) {
    DictData d;
    for (const auto& [k, x] : a.kwargs) d.set(Value(k), x);
    return Value(percent_format(to_str(v), Value::dict(std::move(d))));
  }
  return Value(percent_format(to_str(v), Value::tuple(a.args)));
}

Value do_batch(const Value& v, CallArgs& a) {
  Params p(a, "filter 'batch'", {"linecount", "fill_with"});
  const int64_t n = p.int_arg(0, 0);
  if (n <= 0) runtime_error("filter 'batch': linecount must be positive");
  std::vector<Value> out, cur;
  for (const Value& item : iterate(v)) {
    cur.push_back(item);
    if (int64_t(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (p.has(1))
      while (int64_t(cur.size()) < n) cur.push_back(p.get(1));
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value do_unique(const Value& v, CallArgs& a) {
  Params p(a, "filter 'unique'", {"case_sensitive", "attribute"});
  const bool cs = p.bool_arg(0, false);
  const std::string attr = p.str_arg(1, "");
  std::vector<Value> out, seen;
  for (const Value& item : iterate(v)) {
    Value k = sort_key(item, attr, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(std::move(k));
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value do_sum(const Value& v, CallArgs& a) {
  Params p(a, "filter 'sum'", {"attribute", "start"});
  const std::string attr = p.str_arg(0, "");
  Value total = p.get_or(1, Value(0));
  for (const Value& item : iterate(v)) total = binary_op("+", total, attr.empty() ? item : attribute_path(item, attr));
  return total;
}

Value do_first_last(const Value& v, bool first) {
  if (v.is_string() || v.is_list() || v.is_dict() || v.is_undefined()) {
    const std::vector<Value> items = iterate(v);
    if (items.empty())
      return Value::undefined(first ? "No first item, sequence was empty." : "No last item, sequence was empty.");
    return first ? items.front() : items.back();
  }
  runtime_error("'" + v.type_name() + "' object is not iterable");
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> table = [] {
    std::map<std::string, FilterFn> t;
    t["abs"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'abs'");
      if (v.is_float()) return Value(std::fabs(v.get_float()));
      if (v.is_int() || v.is_bool()) return v.as_int() < 0 ? negate(v) : Value(v.as_int());
      runtime_error("bad operand type for abs(): '" + v.type_name() + "'");
    };
    t["attr"] = [](const Value& v, CallArgs& a) {
      Params p(a, "filter 'attr'", {"name"});
      const std::string n = p.str_arg(0, "");
      // An attribute only: a dict's methods, never its keys.
      if (v.is_dict() && method_kind(v, n) == MethodKind::None)
        return Value::undefined("'dict object' has no attribute '" + n + "'");
      return get_attr(v, n);
    };
    t["batch"] = do_batch;
    t["capitalize"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'capitalize'");
      return Value(pystr::capitalize(to_str(v)));
    };
    t["center"] = [](const Value& v, CallArgs& a) {
      Params p(a, "filter 'center'", {"width"});
      CallArgs ca;
      ca.args.push_back(Value(p.int_arg(0, 80)));
      return call_value(get_attr(Value(to_str(v)), "center"), ca);
    };
    t["default"] = [](const Value& v, CallArgs& a) {
      Params p(a, "filter 'default'", {"default_value", "boolean"});
      const bool use_default = p.bool_arg(1, false) ? !truthy(v) : v.is_undefined();
      return use_default ? p.get_or(0, Value("")) : v;
    };
    t["d"] = t["default"];
    t["dictsort"] = do_dictsort;
    t["escape"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'escape'");
      return Value(html_escape(to_str(v)));
    };
    t["e"] = t["escape"];
    t["forceescape"] = t["escape"];
    t["first"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'first'");
      return do_first_last(v, true);
    };
    t["last"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'last'");
      return do_first_last(v, false);
    };
    t["float"] = do_float;
    t["format"] = do_format;
    t["indent"] = do_indent;
    t["int"] = do_int;
    t["items"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'items'");
      if (v.is_undefined()) return Value::list({});
      if (!v.is_dict()) runtime_error("Can only get item pairs from a mapping.");
      std::vector<Value> out;
      for (const auto& [k, x] : v.dict().entries) out.push_back(Value::tuple({k, x}));
      return Value::list(std::move(out));
    };
    t["join"] = do_join;
    t["length"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'length'");
      return Value(length_of(v));
    };
    t["count"] = t["length"];
    t["list"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'list'");
      return Value::list(iterate(v));
    };
    t["lower"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'lower'");
      return Value(pystr::lower(to_str(v)));
    };
    t["upper"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'upper'");
      return Value(pystr::upper(to_str(v)));
    };
    t["title"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'title'");
      return Value(pystr::jinja_title(to_str(v)));
    };
    t["map"] = do_map;
    t["max"] = [](const Value& v, CallArgs& a) { return do_minmax(v, a, true, "max"); };
    t["min"] = [](const Value& v, CallArgs& a) { return do_minmax(v, a, false, "min"); };
    t["reject"] = [](const Value& v, CallArgs& a) { return select_items(v, a, false, false, "reject"); };
    t["rejectattr"] = [](const Value& v, CallArgs& a) { return select_items(v, a, true, false, "rejectattr"); };
    t["select"] = [](const Value& v, CallArgs& a) { return select_items(v, a, false, true, "select"); };
    t["selectattr"] = [](const Value& v, CallArgs& a) { return select_items(v, a, true, true, "selectattr"); };
    t["replace"] = [](const Value& v, CallArgs& a) {
      Params p(a, "filter 'replace'", {"old", "new", "count"});
      if (!p.has(0) || !p.has(1)) runtime_error("filter 'replace' needs the old and the new text");
      std::string out = pystr::replace(to_str(v), to_str(p.get(0)), to_str(p.get(1)), p.int_arg(2, -1));
      check_string_size(out.size());
      return Value(std::move(out));
    };
    t["reverse"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'reverse'");
      if (v.is_string()) return slice(v, Value::none(), Value::none(), Value(-1));
      std::vector<Value> items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    };
    t["round"] = do_round;
    t["safe"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'safe'");
      return v;  // autoescaping is off for chat templates: nothing to mark
    };
    t["sort"] = do_sort;
    t["string"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'string'");
      return Value(to_str(v));
    };
    t["sum"] = do_sum;
    t["tojson"] = do_tojson;
    t["trim"] = [](const Value& v, CallArgs& a) {
      Params p(a, "filter 'trim'", {"chars"});
      std::optional<std::string> chars;
      if (!p.absent(0)) chars = p.str_arg(0, "");
      return Value(pystr::strip(to_str(v), chars, true, true));
    };
    t["unique"] = do_unique;
    t["wordcount"] = [](const Value& v, CallArgs& a) {
      no_args(a, "filter 'wordcount'");
      int64_t n = 0;
      bool in_word = false;
      const std::string s = to_str(v);
      for (size_t i = 0; i < s.size();) {
        const auto off = pystr::offsets(std::string_view(s).substr(i, 4));
        const size_t len = off.size() > 1 ? off[1] : 1;
        const std::string ch = s.substr(i, len);
        const bool w = ch == "_" || pystr::all_of(ch, pystr::is_alnum_cp);
        if (w && !in_word) ++n;
        in_word = w;
        i += len;
      }
      return Value(n);
    };
    return t;
  }();
  return table;
}

}  // namespace

Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t i = 0;
  while (true) {
    const size_t dot = path.find('.', i);
    const std::string part = path.substr(i, dot == std::string::npos ? std::string::npos : dot - i);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = get_item(cur, digits ? Value(int64_t(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return cur;
    i = dot + 1;
  }
}

bool has_filter(const std::string& name) { return filters().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  const auto& t = filters();
  const auto it = t.find(name);
  if (it == t.end()) runtime_error("no filter named '" + name + "'");
  return it->second(input, args);
}

}  // namespace fish::chat::jinja
