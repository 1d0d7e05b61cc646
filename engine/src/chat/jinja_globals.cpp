// Global functions of the template environment (see jinja_globals.h).
#include "chat/jinja_globals.h"

#include "chat/jinja_args.h"
#include "chat/jinja_error.h"

namespace fish::chat::jinja {

namespace {

Value do_range(CallArgs& a) {
  if (!a.kwargs.empty()) runtime_error("range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3)
    runtime_error("range expected 1 to 3 arguments, got " + std::to_string(a.args.size()));
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < a.args.size(); ++i) {
    const Value& x = a.args[i];
    if (!x.is_int() && !x.is_bool()) {
      std::string msg = "'";  // appended: GCC 12 misreports "lit" + std::string (-Wrestrict)
      msg += x.type_name();
      msg += "' object cannot be interpreted as an integer";
      runtime_error(msg);
    }
    v[i] = x.as_int();
  }
  int64_t start = 0, stop = v[0], step = 1;
  if (a.args.size() >= 2) {
    start = v[0];
    stop = v[1];
  }
  if (a.args.size() == 3) step = v[2];
  if (step == 0) runtime_error("range() arg 3 must not be zero");
  // Item count computed without overflow.
  uint64_t n = 0;
  if (step > 0 && start < stop) n = (uint64_t(stop) - uint64_t(start) - 1) / uint64_t(step) + 1;
  if (step < 0 && start > stop) n = (uint64_t(start) - uint64_t(stop) - 1) / (uint64_t(0) - uint64_t(step)) + 1;
  if (n > uint64_t(kMaxRange))
    runtime_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + std::to_string(kMaxRange) +
                  ").");
  std::vector<Value> out;
  out.reserve(size_t(n));
  for (uint64_t i = 0; i < n; ++i) out.emplace_back(int64_t(uint64_t(start) + i * uint64_t(step)));
  return Value::list(std::move(out));
}

// dict(mapping_or_pairs, **kwargs) and namespace(...) take the same arguments.
DictData dict_args(CallArgs& a, const char* fn) {
  DictData d;
  if (a.args.size() > 1) runtime_error(std::string(fn) + " expected at most 1 positional argument");
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict()) {
      d = src.dict();
    } else if (src.is_list()) {
      for (const Value& pair : src.items()) {
        if (!pair.is_list() || pair.items().size() != 2)
          runtime_error(std::string(fn) + ": each element must be a key/value pair");
        d.set(pair.items()[0], pair.items()[1]);
      }
    } else if (!src.is_undefined()) {
      runtime_error(std::string(fn) + ": '" + src.type_name() + "' object is not a mapping");
    }
  }
  for (const auto& [k, v] : a.kwargs) d.set(Value(k), v);
  return d;
}

}  // namespace

bool holds_namespace(const Value& v) {
  if (v.is_namespace()) return true;
  if (v.is_list()) {
    for (const Value& x : v.items())
      if (holds_namespace(x)) return true;
  } else if (v.is_dict()) {
    for (const auto& [k, x] : v.dict().entries)
      if (holds_namespace(x)) return true;
  }
  return false;
}

std::vector<std::pair<std::string, Value>> make_globals(const std::optional<DateTime>& now) {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::function("range", do_range));
  g.emplace_back("dict", Value::function("dict", [](CallArgs& a) { return Value::dict(dict_args(a, "dict()")); }));
  g.emplace_back("namespace", Value::function("namespace", [](CallArgs& a) {
                   DictData d = dict_args(a, "namespace()");
                   for (const auto& [k, v] : d.entries)
                     if (holds_namespace(v)) runtime_error("a namespace cannot hold a namespace");
                   return Value::make_namespace(std::move(d));
                 }));
  g.emplace_back("raise_exception", Value::function("raise_exception", [](CallArgs& a) -> Value {
                   Params p(a, "raise_exception()", {"message"});
                   throw Error(Error::Kind::Raised, to_str(p.get(0)));
                 }));
  g.emplace_back("strftime_now", Value::function("strftime_now", [now](CallArgs& a) {
                   Params p(a, "strftime_now()", {"format"});
                   if (!p.get(0).is_string()) runtime_error("strftime_now() argument must be a string");
                   return Value(py_strftime(p.get(0).get_string(), now ? *now : local_now()));
                 }));
  return g;
}

}  // namespace fish::chat::jinja
