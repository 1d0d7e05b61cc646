// The parsed template: statements and expressions, as the parser builds them
// and the renderer walks them. Plain structs with a kind tag: a chat template
// is a few hundred nodes, and one generic node type keeps parser and renderer
// short. Every node carries its source position for error messages.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace fish::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind : uint8_t {
    Literal,     // value
    Name,        // name
    GetAttr,     // args[0].name             (x.name, also x.0)
    GetItem,     // args[0][args[1]]
    Slice,       // args[0][args[1]:args[2]:args[3]], absent bounds are null
    Call,        // args[0](args[1..], kwargs)
    Filter,      // args[0] | name(args[1..], kwargs)
    Test,        // args[0] is name(args[1..], kwargs)
    Not,         // not args[0]
    Neg,         // -args[0]
    Pos,         // +args[0]
    Binary,      // args[0] name args[1]: + - * / // % ** ~
    Compare,     // args[0] ops[0] args[1] ops[1] args[2] ... (chained, as Python)
    And,         // args[0] and args[1]
    Or,          // args[0] or args[1]
    Cond,        // args[0] if args[1] else args[2] (args[2] null: undefined)
    List,        // [args...]
    Tuple,       // (args...)
    Dict,        // {args[0]: args[1], args[2]: args[3], ...}
    BlockInput,  // the captured body a {% filter %} or {% set x | f %} block feeds its filters
  };

  Kind kind = Kind::Literal;
  int line = 0, col = 0;
  int depth = 1;  // height of the tree under this node (bounded by the parser)
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare: "==" "!=" "<" "<=" ">" ">=" "in" "not in"
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind : uint8_t {
    Text,      // text
    Output,    // {{ expr }}
    If,        // branches (condition, body)..., else_body
    For,       // for targets in expr [if cond]: body, else_body
    Set,       // set targets = expr; or set ns_name.attr = expr
    SetBlock,  // set targets [| filter]: body -> string (filter: expr over BlockInput, may be null)
    Macro,     // macro name(params): body
    Filter,    // filter expr (over BlockInput): body
    With,      // with params (name = expr, ...): body
    Scope,     // a transparent block: body (HF's {% generation %})
    Break,
    Continue,
  };

  Kind kind = Kind::Text;
  int line = 0, col = 0;
  std::string text;                   // Text; Macro: its name; Set to an attribute: the attribute
  ExprPtr expr;                       // Output, Set, For's iterable, SetBlock/Filter's filter chain
  ExprPtr cond;                       // For's `if` filter
  std::vector<std::string> targets;   // For, Set, SetBlock: names (several: tuple unpacking)
  std::vector<std::pair<ExprPtr, Body>> branches;  // If
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro (default may be null), With
};

struct Template {
  Body body;
};

}  // namespace fish::chat::jinja
