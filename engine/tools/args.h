// Tiny argument parser shared by the sub-commands: flags with values, switches,
// and one clear error line for a bad or missing value.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fish::cli {

class Args {
 public:
  Args(int argc, char** argv) : cmd_(argv[0]) {
    for (int i = 1; i < argc; ++i) rest_.emplace_back(argv[i]);
  }
  // Consumes `-x VALUE` / `--long VALUE` / `--long=VALUE`; returns false if absent.
  bool value(const char* shortf, const char* longf, std::string& out) {
    for (size_t i = 0; i < rest_.size(); ++i) {
      const std::string& a = rest_[i];
      if ((shortf && a == shortf) || (longf && a == longf)) {
        if (i + 1 >= rest_.size()) fail(std::string("option ") + a + " needs a value");
        out = rest_[i + 1];
        rest_.erase(rest_.begin() + long(i), rest_.begin() + long(i) + 2);
        return true;
      }
      if (longf && a.rfind(std::string(longf) + "=", 0) == 0) {
        out = a.substr(std::strlen(longf) + 1);
        rest_.erase(rest_.begin() + long(i));
        return true;
      }
    }
    return false;
  }
  bool int_value(const char* s, const char* l, int64_t& out) {
    std::string v;
    if (!value(s, l, v)) return false;
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || errno) fail(std::string("option ") + (l ? l : s) + ": '" + v + "' is not an integer");
    out = x;
    return true;
  }
  bool float_value(const char* s, const char* l, double& out) {
    std::string v;
    if (!value(s, l, v)) return false;
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end) fail(std::string("option ") + (l ? l : s) + ": '" + v + "' is not a number");
    out = x;
    return true;
  }
  bool flag(const char* shortf, const char* longf) {
    for (size_t i = 0; i < rest_.size(); ++i)
      if ((shortf && rest_[i] == shortf) || (longf && rest_[i] == longf)) {
        rest_.erase(rest_.begin() + long(i));
        return true;
      }
    return false;
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
};

}  // namespace fish::cli
