// Python-style binding of call arguments for the built-in filters, tests,
// methods and globals: parameters by position or by name, defaults for the
// rest, and a TypeError naming the function for too many or unknown ones.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "chat/jinja_error.h"
#include "chat/jinja_value.h"

namespace fish::chat::jinja {

class Params {
 public:
  // `fn` names the function in messages ("filter 'join'"); `names` are its
  // parameters after the implicit first one (the filtered value, the object).
  Params(const CallArgs& a, std::string fn, std::initializer_list<const char*> names)
      : fn_(std::move(fn)), names_(names), vals_(names_.size()), given_(names_.size(), false) {
    if (a.args.size() > names_.size())
      runtime_error(fn_ + " takes at most " + std::to_string(names_.size()) + " argument(s) (" +
                    std::to_string(a.args.size()) + " given)");
    for (size_t i = 0; i < a.args.size(); ++i) {
      vals_[i] = a.args[i];
      given_[i] = true;
    }
    for (const auto& [k, v] : a.kwargs) {
      size_t i = 0;
      while (i < names_.size() && k != names_[i]) ++i;
      if (i == names_.size()) runtime_error(fn_ + " got an unexpected keyword argument '" + k + "'");
      if (given_[i]) runtime_error(fn_ + " got multiple values for argument '" + k + "'");
      vals_[i] = v;
      given_[i] = true;
    }
  }

  bool has(size_t i) const { return given_[i]; }
  const Value& get(size_t i) const { return vals_[i]; }  // Undefined when not given
  Value get_or(size_t i, Value def) const { return given_[i] ? vals_[i] : std::move(def); }
  // Not given or None.
  bool absent(size_t i) const { return !given_[i] || vals_[i].is_none(); }

  int64_t int_arg(size_t i, int64_t def) const {
    if (absent(i)) return def;
    const Value& v = vals_[i];
    if (!v.is_int() && !v.is_bool())
      runtime_error(fn_ + ": argument '" + names_[i] + "' must be an integer, not " + v.type_name());
    return v.as_int();
  }
  std::string str_arg(size_t i, const std::string& def) const {
    if (absent(i)) return def;
    const Value& v = vals_[i];
    if (!v.is_string()) runtime_error(fn_ + ": argument '" + names_[i] + "' must be a string, not " + v.type_name());
    return v.get_string();
  }
  bool bool_arg(size_t i, bool def) const { return given_[i] ? truthy(vals_[i]) : def; }
  const std::string& fn() const { return fn_; }

 private:
  std::string fn_;
  std::vector<const char*> names_;
  std::vector<Value> vals_;
  std::vector<bool> given_;
};

// Rejects any argument: for methods and filters that take none.
inline void no_args(const CallArgs& a, const std::string& fn) { Params p(a, fn, {}); }

}  // namespace fish::chat::jinja
