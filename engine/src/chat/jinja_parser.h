// The Jinja parser: tokens -> Template, with jinja2's grammar and operator
// precedence (filters bind tighter than arithmetic: '\n' + x | trim is
// '\n' + (x | trim); ** is left-associative as in jinja2).
//
// Statements: for (with `if` filter, else, loop.*), if/elif/else, set (to
// names, tuples, namespace attributes, and block set), macro, filter, with,
// break/continue (the loopcontrols extension), generation (HF's), raw.
// Anything else is a syntax error naming the tag, with line and column.
//
// Nesting is bounded so that no input can exhaust the stack while parsing,
// rendering or freeing the tree: blocks kMaxBlockDepth deep, brackets and
// unary operators kMaxNesting deep, expression trees kMaxExprDepth high.
#pragma once
#include <string_view>

#include "chat/jinja_ast.h"

namespace fish::chat::jinja {

constexpr int kMaxBlockDepth = 64;
constexpr int kMaxNesting = 64;
constexpr int kMaxExprDepth = 256;

// Throws jinja::Error (Syntax) with the line and column of the offending token.
Template parse(std::string_view source);

}  // namespace fish::chat::jinja
