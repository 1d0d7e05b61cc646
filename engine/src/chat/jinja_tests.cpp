// jinja2's built-in tests: `x is defined`, `x is string`, `x is divisibleby 3`
// (see jinja_builtins.h). Type tests follow Python's isinstance: bool is a
// number; a string is iterable and a sequence; Undefined is iterable (empty).
#include <functional>
#include <map>

#include "chat/jinja_args.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_pystr.h"

namespace fish::chat::jinja {

namespace {

using TestFn = std::function<bool(const Value&, CallArgs&)>;

TestFn no_arg(bool (*pred)(const Value&), const char* name) {
  return [pred, name](const Value& v, CallArgs& a) {
    no_args(a, std::string("test '") + name + "'");
    return pred(v);
  };
}

const Value& one_arg(CallArgs& a, const char* name) {
  if (a.args.size() != 1 || !a.kwargs.empty()) runtime_error(std::string("test '") + name + "' takes one argument");
  return a.args[0];
}

TestFn comparison(const char* op, const char* name) {
  const std::string o = op;
  return [o, name](const Value& v, CallArgs& a) {
    const Value& other = one_arg(a, name);
    if (o == "==") return equals(v, other);
    if (o == "!=") return !equals(v, other);
    const int c = compare(v, other, o.c_str());
    if (o == "<") return c < 0;
    if (o == "<=") return c <= 0;
    if (o == ">") return c > 0;
    return c >= 0;
  };
}

// Python's `is`: identity. Small scalars compare by value (CPython caches them);
// containers by identity of their storage.
bool same_as(const Value& a, const Value& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return true;
    case Value::Type::Bool: return a.get_bool() == b.get_bool();
    case Value::Type::Int: return a.get_int() == b.get_int() && a.get_int() >= -5 && a.get_int() <= 256;
    case Value::Type::Float: return a.get_float() == b.get_float();  // the same variable, as templates use it
    case Value::Type::String: return a.get_string() == b.get_string();
    case Value::Type::List: return &a.items() == &b.items();
    case Value::Type::Dict: return &a.dict() == &b.dict();
    case Value::Type::Namespace: return &a.ns() == &b.ns();
    case Value::Type::Callable: return &a.callable() == &b.callable();
    default: return false;
  }
}

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> table = [] {
    std::map<std::string, TestFn> t;
    t["defined"] = no_arg([](const Value& v) { return !v.is_undefined(); }, "defined");
    t["undefined"] = no_arg([](const Value& v) { return v.is_undefined(); }, "undefined");
    t["none"] = no_arg([](const Value& v) { return v.is_none(); }, "none");
    t["boolean"] = no_arg([](const Value& v) { return v.is_bool(); }, "boolean");
    t["true"] = no_arg([](const Value& v) { return v.is_bool() && v.get_bool(); }, "true");
    t["false"] = no_arg([](const Value& v) { return v.is_bool() && !v.get_bool(); }, "false");
    t["integer"] = no_arg([](const Value& v) { return v.is_int(); }, "integer");
    t["float"] = no_arg([](const Value& v) { return v.is_float(); }, "float");
    t["number"] = no_arg([](const Value& v) { return v.is_number(); }, "number");
    t["string"] = no_arg([](const Value& v) { return v.is_string(); }, "string");
    t["mapping"] = no_arg([](const Value& v) { return v.is_dict(); }, "mapping");
    t["iterable"] = no_arg(
        [](const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }, "iterable");
    t["sequence"] = no_arg(
        [](const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }, "sequence");
    t["callable"] = no_arg([](const Value& v) { return v.is_callable(); }, "callable");
    t["escaped"] = no_arg([](const Value&) { return false; }, "escaped");
    t["lower"] = no_arg([](const Value& v) { return pystr::is_lower(to_str(v)); }, "lower");
    t["upper"] = no_arg([](const Value& v) { return pystr::is_upper(to_str(v)); }, "upper");
    t["even"] = no_arg([](const Value& v) { return !truthy(binary_op("%", v, Value(2))); }, "even");
    t["odd"] = no_arg([](const Value& v) { return truthy(binary_op("%", v, Value(2))); }, "odd");
    t["divisibleby"] = [](const Value& v, CallArgs& a) {
      return !truthy(binary_op("%", v, one_arg(a, "divisibleby")));
    };
    t["in"] = [](const Value& v, CallArgs& a) { return contains(one_arg(a, "in"), v); };
    t["sameas"] = [](const Value& v, CallArgs& a) { return same_as(v, one_arg(a, "sameas")); };
    t["filter"] = [](const Value& v, CallArgs& a) {
      no_args(a, "test 'filter'");
      return v.is_string() && has_filter(v.get_string());
    };
    t["test"] = [](const Value& v, CallArgs& a) {
      no_args(a, "test 'test'");
      return v.is_string() && has_test(v.get_string());
    };
    struct Cmp {
      const char* names[3];
      const char* op;
    };
    static const Cmp kCmps[] = {{{"eq", "equalto", "=="}, "=="},     {{"ne", "!=", nullptr}, "!="},
                                {{"lt", "lessthan", "<"}, "<"},      {{"le", "<=", nullptr}, "<="},
                                {{"gt", "greaterthan", ">"}, ">"},   {{"ge", ">=", nullptr}, ">="}};
    for (const Cmp& c : kCmps)
      for (const char* n : c.names)
        if (n) t[n] = comparison(c.op, n);
    return t;
  }();
  return table;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) != 0; }

bool apply_test(const std::string& name, const Value& input, CallArgs& args) {
  const auto& t = tests();
  const auto it = t.find(name);
  if (it == t.end()) runtime_error("no test named '" + name + "'");
  return it->second(input, args);
}

}  // namespace fish::chat::jinja
