// jinja::Value: what a template computes with, with Python's semantics.
//
// Why a type of our own rather than a JSON type (nlohmann::ordered_json or
// similar): chat templates were written against Python's jinja2, and their
// output depends on Python behaviour a JSON value cannot express:
//  - Undefined (a missing variable or key) is distinct from None: it prints as
//    "", is falsy, iterates as empty, but fails when used in arithmetic, and
//    `x is defined` tells them apart;
//  - int and float stay distinct (1 vs 1.0 print differently; 7 // 2 is int);
//    bool is an int (True == 1, True + 1 == 2);
//  - a tuple prints as (a, b) and is not equal to the list [a, b];
//  - namespace() objects are mutable and shared (the one way a loop body can
//    change a variable outside the loop), macros and methods are callables.
// Dict keys keep insertion order, as Python's dicts do (tojson and iteration
// print them in that order). Lists and dicts are immutable once built (the
// sandbox HF renders in forbids append/update), so they are shared, never copied.
//
// Nesting depth is bounded (kMaxValueDepth) when a list or dict is built, so
// printing, comparing and destroying a value can never exhaust the stack.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace fish::chat::jinja {

constexpr int kMaxValueDepth = 256;

class Value;
struct ListData;
struct DictData;
struct NamespaceData;
struct CallableData;

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() : v_(Undef{}) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t(i)) {}
  Value(int64_t i) : v_(i) {}
  Value(double f) : v_(f) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}

  // `hint` is the message of the error raised when the undefined value is used,
  // e.g. "'foo' is undefined" or "'dict object' has no attribute 'x'".
  static Value undefined(std::string hint = "value is undefined");
  static Value none();
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict(DictData d);
  static Value make_namespace(DictData attrs);
  static Value function(std::string name, Function fn);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_undefined() const { return type() == Type::Undefined; }
  bool is_none() const { return type() == Type::None; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_int() const { return type() == Type::Int; }
  bool is_float() const { return type() == Type::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python: bool is an int
  bool is_string() const { return type() == Type::String; }
  bool is_list() const { return type() == Type::List; }  // list or tuple
  bool is_tuple() const;
  bool is_dict() const { return type() == Type::Dict; }
  bool is_namespace() const { return type() == Type::Namespace; }
  bool is_callable() const { return type() == Type::Callable; }

  bool get_bool() const { return std::get<bool>(v_); }
  int64_t get_int() const { return std::get<int64_t>(v_); }
  double get_float() const { return std::get<double>(v_); }
  const std::string& get_string() const { return std::get<std::string>(v_); }
  const std::vector<Value>& items() const;   // list or tuple elements
  const DictData& dict() const;              // a dict
  NamespaceData& ns() const;                 // a namespace (mutable, shared)
  const CallableData& callable() const;
  const std::string& undefined_hint() const { return std::get<Undef>(v_).hint; }

  // An int view of a bool or int (Python's int(True) == 1).
  int64_t as_int() const { return is_bool() ? int64_t(get_bool()) : get_int(); }
  // A float view of any number.
  double as_float() const;

  // 0 for scalars, 1 + the deepest element for lists, dicts and namespaces.
  int depth() const;
  // Python's type name: 'str', 'int', 'list', 'dict', 'NoneType', ... (for messages).
  std::string type_name() const;

 private:
  struct Undef {
    std::string hint;
  };
  struct NoneT {};
  using Storage = std::variant<Undef, NoneT, bool, int64_t, double, std::string, std::shared_ptr<const ListData>,
                               std::shared_ptr<const DictData>, std::shared_ptr<NamespaceData>,
                               std::shared_ptr<const CallableData>>;
  explicit Value(Storage v) : v_(std::move(v)) {}
  Storage v_;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;
};

// An insertion-ordered mapping with Python key equality (1 == 1.0 == True).
// Dicts in chat templates are small (a message, a tool schema), so a vector
// with linear lookup beats a hash map and keeps the order for free.
struct DictData {
  std::vector<std::pair<Value, Value>> entries;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  // Replaces the value of an existing key in place (its position is kept, as
  // Python does), else appends.
  void set(Value key, Value value);
  size_t size() const { return entries.size(); }
  int depth = 1;  // set by Value::dict
};

struct NamespaceData {
  DictData attrs;
};

struct CallableData {
  std::string name;
  Function fn;
};

// --- Python semantics (jinja_value.cpp) ---

bool truthy(const Value& v);
// Python ==: numbers across int/float/bool, lists and tuples element-wise
// (a list never equals a tuple), dicts regardless of order; Undefined equals
// only Undefined.
bool equals(const Value& a, const Value& b);
// Python's <, <=, >, >= as -1/0/1: numbers, strings (code point order), lists
// and tuples lexicographically; anything else is a TypeError naming `op`.
int compare(const Value& a, const Value& b, const char* op);
// Python's str(): None -> "None", True -> "True", floats as repr, lists and
// dicts as their repr; Undefined -> "" (as Jinja prints it).
std::string to_str(const Value& v);
// Python's repr(): strings quoted as Python quotes them.
std::string repr(const Value& v);
// Python's repr of a float: the shortest text that reads back the same double,
// fixed notation for exponents -4..15, else d.ddde+XX.
std::string float_repr(double f);
// Throws the error an undefined value raises when it is used.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace fish::chat::jinja
