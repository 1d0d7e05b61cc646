// Helpers for the C API implementation: the error object and exception fencing.
#pragma once
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "fish/fish.h"

struct fish_error {
  std::string message;
};

namespace fish::capi {

inline void set_error(fish_error** err, const std::string& msg) {
  if (err) *err = new fish_error{msg};
}

// malloc'd copy (released with fish_free).
inline char* dup_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// Runs fn(); an exception becomes an error message (never crosses the C boundary).
template <class Fn>
bool guarded(fish_error** err, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    set_error(err, e.what());
  } catch (...) {
    set_error(err, "unknown internal error");
  }
  return false;
}

// Runs fn() and returns its value; an exception returns `fallback` instead
// (for entry points that report failure by value: every C entry point is fenced).
template <class T, class Fn>
T fenced(T fallback, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (...) {
    return fallback;
  }
}
template <class Fn>
void fenced_void(Fn&& fn) noexcept {
  try {
    fn();
  } catch (...) {
  }
}

}  // namespace fish::capi
