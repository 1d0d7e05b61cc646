// Rendering a parsed template: the interpreter over jinja_ast.h.
//
// Scoping is jinja2's: a for loop's body gets a fresh scope on every
// iteration (a `set` inside it is gone at the next one, hence namespace()),
// `if` has no scope of its own, a macro runs in a scope of its own whose
// parent is where it was defined, seeing that scope's variables as they are
// at call time.
//
// Globals are those of Hugging Face's environment: range, dict, namespace,
// raise_exception(msg) (a Raised error carrying msg) and strftime_now(fmt).
// Runtime bounds (macro recursion, loop iterations, string size) turn a
// runaway template into an error instead of a hang or a crash.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_strftime.h"
#include "chat/jinja_value.h"

namespace fish::chat::jinja {

constexpr int kMaxCallDepth = 64;              // nested macro calls
constexpr int64_t kMaxIterations = 1000000;   // loop iterations in one rendering

struct RenderContext {
  std::vector<std::pair<std::string, Value>> vars;  // the template's variables (messages, bos_token, ...)
  std::optional<DateTime> now;                      // strftime_now's time; unset: the local clock
};

// Throws jinja::Error: Raised for raise_exception, Runtime (with the line and
// column of the failing expression) for anything else.
std::string render(const Template& tpl, const RenderContext& ctx);

}  // namespace fish::chat::jinja
