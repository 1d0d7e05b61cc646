// Object protocol and operators (see jinja_ops.h).
#include "chat/jinja_ops.h"

#include <cmath>
#include <optional>

#include "chat/jinja_error.h"
#include "chat/jinja_format.h"
#include "chat/jinja_methods.h"
#include "chat/jinja_pystr.h"

namespace fish::chat::jinja {

namespace {

std::string no_attribute(const Value& obj, const std::string& name) {
  std::string msg = "'";  // built by appending: GCC 12 misreports "lit" + std::string (-Wrestrict)
  msg += obj.type_name();
  msg += " object' has no attribute '";
  msg += name;
  msg += "'";
  return msg;
}

// Python's index normalisation: -1 is the last element; out of range: false.
bool normalize_index(int64_t& i, size_t n) {
  if (i < 0) i += int64_t(n);
  return i >= 0 && i < int64_t(n);
}

[[noreturn]] void unsupported_operand(const std::string& op, const Value& a, const Value& b) {
  runtime_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// Python ints do not overflow; fish's are 64-bit and say so instead of wrapping.
[[noreturn]] void overflow() { runtime_error("integer overflow (beyond 64 bits)"); }
int64_t add_i(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t sub_i(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
int64_t mul_i(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.get_string();
    check_string_size(s.size() * size_t(n > 0 ? n : 0));
    std::string out;
    out.reserve(s.size() * size_t(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const auto& items = seq.items();
  if (items.size() * size_t(n) > (size_t(1) << 24)) runtime_error("list repetition too large");
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// Python's floor division and modulo (results take the sign of the divisor).
int64_t floor_div(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
double py_fmod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  else if (r == 0) r = std::copysign(0.0, b);
  return r;
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = mul_i(result, base);
    exp >>= 1;
    if (exp) base = mul_i(base, base);
  }
  return Value(result);
}

}  // namespace

void check_string_size(size_t bytes) {
  if (bytes > kMaxStringBytes) runtime_error("string longer than " + std::to_string(kMaxStringBytes >> 20) + " MiB");
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  switch (method_kind(obj, name)) {
    case MethodKind::Safe: return bound_method(obj, name);
    case MethodKind::Unsafe:
      return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
    case MethodKind::Unsupported:
      runtime_error("the " + obj.type_name() + " method '" + name + "' is not supported by fish's template engine");
    case MethodKind::None: break;
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(std::string_view(name))) return *v;
  } else if (obj.is_namespace()) {
    if (const Value* v = obj.ns().attrs.find(std::string_view(name))) return *v;
  }
  return Value::undefined(no_attribute(obj, name));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if (obj.is_namespace()) {
    if (key.is_string())
      if (const Value* v = obj.ns().attrs.find(std::string_view(key.get_string()))) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      if (normalize_index(i, obj.items().size())) return obj.items()[size_t(i)];
      return Value::undefined(obj.type_name() + " object has no element " + std::to_string(key.as_int()));
    }
    const std::vector<size_t> off = pystr::offsets(obj.get_string());
    if (normalize_index(i, off.size() - 1))
      return Value(obj.get_string().substr(off[size_t(i)], off[size_t(i) + 1] - off[size_t(i)]));
    return Value::undefined("str object has no element " + std::to_string(key.as_int()));
  }
  // Not an item: jinja2 falls back to the attribute of that name.
  if (key.is_string()) return get_attr(obj, key.get_string());
  std::string msg = "'";  // appended: GCC 12 misreports "lit" + std::string (-Wrestrict)
  msg += obj.type_name();
  msg += " object' has no element ";
  msg += repr(key);
  return Value::undefined(msg);
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_int() && !v.is_bool())
      runtime_error(std::string("slice indices must be integers or None (") + what + " is " + v.type_name() + ")");
    return v.as_int();
  };
  const std::optional<int64_t> b0 = bound(start, "start"), e0 = bound(stop, "stop"), s0 = bound(step, "step");
  const int64_t st = s0.value_or(1);
  if (st == 0) runtime_error("slice step cannot be zero");
  std::vector<size_t> off;
  size_t n = 0;
  if (obj.is_string()) {
    off = pystr::offsets(obj.get_string());
    n = off.size() - 1;
  } else if (obj.is_list()) {
    n = obj.items().size();
  } else {
    runtime_error("'" + obj.type_name() + "' object is not subscriptable");
  }
  // Python's PySlice_AdjustIndices.
  const int64_t len = int64_t(n);
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= len) {
      x = st < 0 ? len - 1 : len;
    }
    return x;
  };
  const int64_t b = adjust(b0, st < 0 ? len - 1 : 0);
  const int64_t e = adjust(e0, st < 0 ? -1 : len);
  std::vector<int64_t> idx;
  if (st > 0)
    for (int64_t i = b; i < e; i += st) idx.push_back(i);
  else
    for (int64_t i = b; i > e; i += st) idx.push_back(i);
  if (obj.is_string()) {
    const std::string& s = obj.get_string();
    std::string out;
    for (int64_t i : idx) out.append(s, off[size_t(i)], off[size_t(i) + 1] - off[size_t(i)]);
    return Value(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(obj.items()[size_t(i)]);
  return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined: return {};
    case Value::Type::List: return v.items();
    case Value::Type::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& [k, x] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Type::String: {
      std::vector<Value> chars;
      const std::string& s = v.get_string();
      const std::vector<size_t> off = pystr::offsets(s);
      for (size_t i = 0; i + 1 < off.size(); ++i) chars.emplace_back(s.substr(off[i], off[i + 1] - off[i]));
      return chars;
    }
    default: runtime_error("'" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::Undefined: return false;
    case Value::Type::String:
      if (!item.is_string())
        runtime_error("'in <string>' requires string as left operand, not " + item.type_name());
      return container.get_string().find(item.get_string()) != std::string::npos;
    case Value::Type::List:
      for (const Value& x : container.items())
        if (equals(x, item)) return true;
      return false;
    case Value::Type::Dict: return container.dict().find(item) != nullptr;
    default: runtime_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value(-v.get_float());
  if (v.is_int() || v.is_bool()) return Value(sub_i(0, v.as_int()));
  runtime_error("bad operand type for unary -: '" + v.type_name() + "'");
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a);
    const std::string t = to_str(b);
    check_string_size(s.size() + t.size());
    return Value(s + t);
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) return Value(add_i(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      check_string_size(a.get_string().size() + b.get_string().size());
      return Value(a.get_string() + b.get_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    if (a.is_string() || a.is_list())
      runtime_error("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
    unsupported_operand(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value(sub_i(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_float() - b.as_float());
    unsupported_operand(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value(mul_i(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_float() * b.as_float());
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
    unsupported_operand(op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported_operand(op, a, b);
    if (b.as_float() == 0) runtime_error("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//") {
    if (!nums) unsupported_operand(op, a, b);
    if (ints) {
      if (b.as_int() == 0) runtime_error("integer division or modulo by zero");
      return Value(floor_div(a.as_int(), b.as_int()));
    }
    if (b.as_float() == 0) runtime_error("float floor division by zero");
    return Value(std::floor(a.as_float() / b.as_float()));
  }
  if (op == "%") {
    if (a.is_string()) return Value(percent_format(a.get_string(), b));
    if (!nums) unsupported_operand(op, a, b);
    if (ints) {
      if (b.as_int() == 0) runtime_error("integer division or modulo by zero");
      return Value(py_mod(a.as_int(), b.as_int()));
    }
    if (b.as_float() == 0) runtime_error("float modulo");
    return Value(py_fmod(a.as_float(), b.as_float()));
  }
  if (op == "**") {
    if (!nums) unsupported_operand(op, a, b);
    if (ints && b.as_int() >= 0) return int_pow(a.as_int(), b.as_int());
    if (a.as_float() == 0 && b.as_float() < 0) runtime_error("0.0 cannot be raised to a negative power");
    return Value(std::pow(a.as_float(), b.as_float()));
  }
  runtime_error("unknown operator '" + op + "'");
}

Value call_value(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) fail_undefined(fn);
  if (!fn.is_callable()) runtime_error("'" + fn.type_name() + "' object is not callable");
  return fn.callable().fn(args);
}

}  // namespace fish::chat::jinja
