// Tiny argument parser shared by the sub-commands: flags with values, switches,
// and one clear error line for a bad or missing value.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace fish::cli {

class Args {
 public:
  Args(int argc, char** argv) : cmd_(argv[0]) {
    for (int i = 1; i < argc; ++i) rest_.emplace_back(argv[i]);
  }
  // Consumes every `NAME VALUE` / `--long=VALUE` for any of `names` (the
  // aliases of one option); the last one given wins, as users expect from a
  // repeated flag. Returns false if none is present.
  bool value(std::initializer_list<const char*> names, std::string& out) {
    bool found = false;
    for (size_t i = 0; i < rest_.size();) {
      const std::string& a = rest_[i];
      size_t used = 0;
      const char* matched = "";
      for (const char* n : names) {
        if (!n) continue;
        if (a == n) {
          if (i + 1 >= rest_.size()) fail("option " + a + " needs a value");
          out = rest_[i + 1];
          used = 2;
        } else if (n[0] == '-' && n[1] == '-' && a.rfind(std::string(n) + "=", 0) == 0) {
          out = a.substr(std::strlen(n) + 1);
          used = 1;
        }
        if (used) {
          matched = n;
          break;
        }
      }
      if (!used) {
        ++i;
        continue;
      }
      found = true;
      last_ = matched;
      rest_.erase(rest_.begin() + long(i), rest_.begin() + long(i + used));
    }
    return found;
  }
  bool value(const char* shortf, const char* longf, std::string& out) { return value({shortf, longf}, out); }
  bool int_value(std::initializer_list<const char*> names, int64_t& out) {
    std::string v;
    if (!value(names, v)) return false;
    const char* l = last_;
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || errno) fail(std::string("option ") + l + ": '" + v + "' is not an integer");
    out = x;
    return true;
  }
  bool int_value(const char* s, const char* l, int64_t& out) { return int_value({s, l}, out); }
  bool float_value(const char* s, const char* l, double& out) {
    std::string v;
    if (!value(s, l, v)) return false;
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end) fail(std::string("option ") + last_ + ": '" + v + "' is not a number");
    out = x;
    return true;
  }
  // Consumes every occurrence of a switch; true if it was given.
  bool flag(const char* shortf, const char* longf) {
    bool found = false;
    for (size_t i = 0; i < rest_.size();)
      if ((shortf && rest_[i] == shortf) || (longf && rest_[i] == longf)) {
        rest_.erase(rest_.begin() + long(i));
        found = true;
      } else {
        ++i;
      }
    return found;
  }
  // Remaining positional arguments; any leftover "-..." is an unknown option.
  std::vector<std::string> positional() {
    for (auto& a : rest_)
      if (a.size() > 1 && a[0] == '-') fail("unknown option '" + a + "'");
    return rest_;
  }
  [[noreturn]] void fail(const std::string& msg) const {
    std::fprintf(stderr, "fish %s: %s\n", cmd_.c_str(), msg.c_str());
    std::exit(2);
  }

 private:
  std::string cmd_;
  std::vector<std::string> rest_;
  const char* last_ = "";  // the name of the option value() consumed last, as typed, for messages
};

}  // namespace fish::cli
