// jinja::Error: the one exception type of the template engine.
//
// Three kinds, because callers treat them differently:
//  - Syntax: the template itself is malformed (found while parsing, before any
//    rendering); carries the line and column (1-based, columns in code points).
//  - Runtime: rendering failed (a type error, an undefined value used, a limit
//    reached); carries the position of the innermost expression or statement.
//  - Raised: the template called raise_exception(msg). what() is the template's
//    message exactly, with nothing added, since it is meant for the user (e.g.
//    gemma-2's "System role not supported").
#pragma once
#include <string>

#include "common/error.h"

namespace fish::chat::jinja {

class Error : public fish::Error {
 public:
  enum class Kind { Syntax, Runtime, Raised };

  Error(Kind kind, std::string reason, int line = 0, int col = 0)
      : fish::Error(format(kind, reason, line, col)), kind_(kind), reason_(std::move(reason)), line_(line), col_(col) {}

  Kind kind() const { return kind_; }
  const std::string& reason() const { return reason_; }
  int line() const { return line_; }  // 0: not known (yet)
  int column() const { return col_; }
  bool has_position() const { return line_ > 0; }

  // The same error placed at line:col (what() is rebuilt); a Raised error keeps its text.
  Error at(int line, int col) const { return Error(kind_, reason_, line, col); }

 private:
  static std::string format(Kind kind, const std::string& reason, int line, int col) {
    if (kind == Kind::Raised) return reason;
    std::string s = kind == Kind::Syntax ? "template syntax error" : "template error";
    if (line > 0) s += " at line " + std::to_string(line) + ", column " + std::to_string(col);
    return s + ": " + reason;
  }

  Kind kind_;
  std::string reason_;
  int line_, col_;
};

// Shorthands for the engine's own code.
[[noreturn]] inline void runtime_error(const std::string& reason) { throw Error(Error::Kind::Runtime, reason); }

}  // namespace fish::chat::jinja
