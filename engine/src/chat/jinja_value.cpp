// Value construction and Python semantics (see jinja_value.h).
#include "chat/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "chat/jinja_error.h"
#include "chat/jinja_pystr.h"

namespace fish::chat::jinja {

namespace {

int check_depth(int d) {
  if (d > kMaxValueDepth)
    runtime_error("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  return d;
}

int items_depth(const std::vector<Value>& items) {
  int d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  return check_depth(d + 1);
}

}  // namespace

Value Value::undefined(std::string hint) { return Value(Storage(Undef{std::move(hint)})); }
Value Value::none() { return Value(Storage(NoneT{})); }

Value Value::list(std::vector<Value> items) {
  auto d = std::make_shared<ListData>();
  d->depth = items_depth(items);
  d->items = std::move(items);
  return Value(Storage(std::shared_ptr<const ListData>(std::move(d))));
}

Value Value::tuple(std::vector<Value> items) {
  auto d = std::make_shared<ListData>();
  d->depth = items_depth(items);
  d->items = std::move(items);
  d->tuple = true;
  return Value(Storage(std::shared_ptr<const ListData>(std::move(d))));
}

Value Value::dict(DictData data) {
  int d = 0;
  for (const auto& [k, v] : data.entries) d = std::max({d, k.depth(), v.depth()});
  data.depth = check_depth(d + 1);
  return Value(Storage(std::shared_ptr<const DictData>(std::make_shared<DictData>(std::move(data)))));
}

Value Value::make_namespace(DictData attrs) {
  auto n = std::make_shared<NamespaceData>();
  n->attrs = std::move(attrs);
  return Value(Storage(std::move(n)));
}

Value Value::function(std::string name, Function fn) {
  return Value(Storage(std::shared_ptr<const CallableData>(
      std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn)}))));
}

bool Value::is_tuple() const { return is_list() && std::get<std::shared_ptr<const ListData>>(v_)->tuple; }
const std::vector<Value>& Value::items() const { return std::get<std::shared_ptr<const ListData>>(v_)->items; }
const DictData& Value::dict() const { return *std::get<std::shared_ptr<const DictData>>(v_); }
NamespaceData& Value::ns() const { return *std::get<std::shared_ptr<NamespaceData>>(v_); }
const CallableData& Value::callable() const { return *std::get<std::shared_ptr<const CallableData>>(v_); }

double Value::as_float() const {
  if (is_float()) return get_float();
  return double(as_int());
}

int Value::depth() const {
  switch (type()) {
    case Type::List: return std::get<std::shared_ptr<const ListData>>(v_)->depth;
    case Type::Dict: return dict().depth;
    case Type::Namespace: {
      // A namespace holds no namespace (the renderer refuses), so this is shallow.
      int d = 0;
      for (const auto& [k, v] : ns().attrs.entries) d = std::max(d, v.depth());
      return d + 1;
    }
    default: return 0;
  }
}

std::string Value::type_name() const {
  switch (type()) {
    case Type::Undefined: return "Undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List: return is_tuple() ? "tuple" : "list";
    case Type::Dict: return "dict";
    case Type::Namespace: return "Namespace";
    case Type::Callable: return "function";
  }
  return "object";
}

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.get_string() == key) return &v;
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : entries)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(std::move(key), std::move(value));
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return false;
    case Value::Type::Bool: return v.get_bool();
    case Value::Type::Int: return v.get_int() != 0;
    case Value::Type::Float: return v.get_float() != 0.0;
    case Value::Type::String: return !v.get_string().empty();
    case Value::Type::List: return !v.items().empty();
    case Value::Type::Dict: return v.dict().size() != 0;
    case Value::Type::Namespace:
    case Value::Type::Callable: return true;
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return true;
    case Value::Type::String: return a.get_string() == b.get_string();
    case Value::Type::List: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Value::Type::Dict: {
      const DictData &x = a.dict(), &y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    case Value::Type::Namespace: return &a.ns() == &b.ns();
    case Value::Type::Callable: return &a.callable() == &b.callable();
    default: return false;
  }
}

int compare(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.get_string().compare(b.get_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return compare(x[i], y[i], op);
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  runtime_error(std::string("'") + op + "' not supported between instances of '" + a.type_name() + "' and '" +
                b.type_name() + "'");
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e+17": shortest digits that read back the same
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out += '-';
    i = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  const int decpt = exp10 + 1;  // digits d1d2... = 0.d1d2... * 10^decpt
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(size_t(-decpt), '0');
      out += digits;
    } else if (size_t(decpt) >= digits.size()) {
      out += digits + std::string(size_t(decpt) - digits.size(), '0') + ".0";
    } else {
      out.append(digits, 0, size_t(decpt));
      out += '.';
      out.append(digits, size_t(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  const int ax = exp10 < 0 ? -exp10 : exp10;
  out += exp10 < 0 ? "e-" : "e+";
  if (ax < 10) out += '0';
  out += std::to_string(ax);
  return out;
}

namespace {

void repr_into(std::string& out, const Value& v);

void str_into(std::string& out, const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined: return;
    case Value::Type::String: out += v.get_string(); return;
    default: repr_into(out, v);
  }
}

void repr_into(std::string& out, const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined: out += "Undefined"; return;
    case Value::Type::None: out += "None"; return;
    case Value::Type::Bool: out += v.get_bool() ? "True" : "False"; return;
    case Value::Type::Int: out += std::to_string(v.get_int()); return;
    case Value::Type::Float: out += float_repr(v.get_float()); return;
    case Value::Type::String: out += pystr::repr(v.get_string()); return;
    case Value::Type::List: {
      const bool tup = v.is_tuple();
      out += tup ? '(' : '[';
      const auto& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, items[i]);
      }
      if (tup && items.size() == 1) out += ',';
      out += tup ? ')' : ']';
      return;
    }
    case Value::Type::Dict:
    case Value::Type::Namespace: {
      const DictData& d = v.is_dict() ? v.dict() : v.ns().attrs;
      if (v.is_namespace()) out += "<Namespace ";
      out += '{';
      for (size_t i = 0; i < d.entries.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, d.entries[i].first);
        out += ": ";
        repr_into(out, d.entries[i].second);
      }
      out += '}';
      if (v.is_namespace()) out += '>';
      return;
    }
    case Value::Type::Callable: out += "<function " + v.callable().name + ">"; return;
  }
}

}  // namespace

std::string to_str(const Value& v) {
  std::string out;
  str_into(out, v);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v);
  return out;
}

void fail_undefined(const Value& v) { runtime_error(v.is_undefined() ? v.undefined_hint() : "value is undefined"); }

}  // namespace fish::chat::jinja
