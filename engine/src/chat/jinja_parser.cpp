// The Jinja parser (see jinja_parser.h): recursive descent, one function per
// precedence level, as jinja2's parser is organised.
#include "chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "chat/jinja_error.h"
#include "chat/jinja_lexer.h"

namespace fish::chat::jinja {

namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::Text: return "template text";
    case TokenType::VarBegin: return "'{{'";
    case TokenType::VarEnd: return "end of print statement ('}}')";
    case TokenType::BlockBegin: return "'{%'";
    case TokenType::BlockEnd: return "end of statement block ('%}')";
    case TokenType::Name: return "'" + t.text + "'";
    case TokenType::String: return "a string";
    case TokenType::Int: return "an integer";
    case TokenType::Float: return "a number";
    case TokenType::Op: return "'" + t.text + "'";
    case TokenType::Eof: return "end of template";
  }
  return "token";
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Template parse_template() {
    Template tpl;
    std::string end;
    tpl.body = parse_body({}, end);
    return tpl;
  }

 private:
  // --- token access ---
  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[p_];
    if (p_ + 1 < t_.size()) ++p_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == TokenType::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail_at(const Token& t, const std::string& why) const {
    throw Error(Error::Kind::Syntax, why, t.line, t.col);
  }
  [[noreturn]] void unexpected(const std::string& wanted) const {
    fail_at(cur(), "expected " + wanted + ", got " + describe(cur()));
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) unexpected(std::string("'") + op + "'");
  }
  std::string expect_name(const char* what) {
    if (cur().type != TokenType::Name) unexpected(what);
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != TokenType::BlockEnd) unexpected("end of statement block ('%}')");
    next();
  }

  // --- nesting bounds ---
  struct Guard {
    Guard(Parser& p, int& depth, int max, const char* what) : d(depth) {
      if (++d > max) p.fail_at(p.cur(), std::string(what) + " nested deeper than " + std::to_string(max) + " levels");
    }
    ~Guard() { --d; }
    int& d;
  };

  ExprPtr node(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  // Adds children and checks the height of the tree (long operator or filter
  // chains build deep trees without deep parser recursion).
  ExprPtr& add(ExprPtr& parent, ExprPtr child) {
    if (child) {
      parent->depth = std::max(parent->depth, child->depth + 1);
      if (parent->depth > kMaxExprDepth)
        throw Error(Error::Kind::Syntax, "expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels",
                    parent->line, parent->col);
    }
    parent->args.push_back(std::move(child));
    return parent->args.back();
  }
  void add_kwarg(ExprPtr& parent, std::string name, ExprPtr child) {
    parent->depth = std::max(parent->depth, child->depth + 1);
    if (parent->depth > kMaxExprDepth)
      throw Error(Error::Kind::Syntax, "expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels",
                  parent->line, parent->col);
    parent->kwargs.emplace_back(std::move(name), std::move(child));
  }
  ExprPtr unary(Expr::Kind kind, const Token& at, ExprPtr x) {
    ExprPtr e = node(kind, at);
    add(e, std::move(x));
    return e;
  }
  ExprPtr binary(Expr::Kind kind, const Token& at, ExprPtr l, ExprPtr r, const std::string& op = "") {
    ExprPtr e = node(kind, at);
    e->name = op;
    add(e, std::move(l));
    add(e, std::move(r));
    return e;
  }

  // --- statements ---
  struct OpenBlock {
    std::string tag;
    int line;
  };

  // Parses until a block tag whose name is in `ends` (consumed, with its name
  // in `which`); at the top level (no ends) until the end of the template.
  Body parse_body(std::initializer_list<const char*> ends, std::string& which) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::Eof) {
        if (ends.size() == 0) return body;
        const OpenBlock& ob = open_.back();
        // Name the closing tag ("endif"), not an alternative such as "elif".
        std::string closer = *ends.begin();
        for (const char* e : ends)
          if (std::string_view(e).substr(0, 3) == "end") closer = e;
        fail_at(t, "unexpected end of template: the '" + ob.tag + "' block from line " + std::to_string(ob.line) +
                       " is never closed (expected '" + closer + "')");
      }
      if (t.type == TokenType::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = t.line;
        s->col = t.col;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
        continue;
      }
      if (t.type == TokenType::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->line = t.line;
        s->col = t.col;
        next();
        s->expr = parse_tuple(true);
        if (cur().type != TokenType::VarEnd) unexpected("end of print statement ('}}')");
        next();
        body.push_back(std::move(s));
        continue;
      }
      if (t.type != TokenType::BlockBegin) unexpected("template text, '{{' or '{%'");
      const Token& tag = peek();
      if (tag.type == TokenType::Name && std::find_if(ends.begin(), ends.end(), [&](const char* e) {
                                           return tag.text == e;
                                         }) != ends.end()) {
        next();
        which = next().text;
        return body;
      }
      body.push_back(parse_statement());
    }
  }

  // Parses a block's body up to one of `ends`, with the open block recorded
  // for messages and the depth bounded.
  Body block_body(const std::string& tag, int line, std::initializer_list<const char*> ends, std::string& which) {
    Guard g(*this, block_depth_, kMaxBlockDepth, "blocks");
    open_.push_back({tag, line});
    Body b = parse_body(ends, which);
    open_.pop_back();
    return b;
  }

  StmtPtr parse_statement() {
    next();  // {%
    const Token& tag = cur();
    if (tag.type != TokenType::Name) unexpected("a tag name");
    const std::string name = tag.text;
    auto s = std::make_unique<Stmt>();
    s->line = tag.line;
    s->col = tag.col;
    next();
    if (name == "for") return parse_for(std::move(s));
    if (name == "if") return parse_if(std::move(s));
    if (name == "set") return parse_set(std::move(s));
    if (name == "macro") return parse_macro(std::move(s));
    if (name == "filter") return parse_filter_block(std::move(s));
    if (name == "with") return parse_with(std::move(s));
    if (name == "generation") {
      s->kind = Stmt::Kind::Scope;
      expect_block_end();
      std::string end;
      s->body = block_body(name, s->line, {"endgeneration"}, end);
      expect_block_end();
      return s;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail_at(tag, "'" + name + "' outside of a for loop");
      s->kind = name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect_block_end();
      return s;
    }
    if (name.rfind("end", 0) == 0 || name == "else" || name == "elif") {
      std::string msg = "unexpected '" + name + "'";
      if (!open_.empty())
        msg += " (the innermost open block is '" + open_.back().tag + "' from line " +
               std::to_string(open_.back().line) + ")";
      else
        msg += " (no block is open)";
      fail_at(tag, msg);
    }
    if (name == "include" || name == "import" || name == "from" || name == "extends" || name == "block" ||
        name == "call" || name == "do" || name == "autoescape" || name == "trans")
      fail_at(tag, "the '" + name + "' tag is not supported by fish's template engine");
    fail_at(tag, "unknown tag '" + name + "'");
  }

  // Names for `for` and `set` targets: a, or a, b (optionally parenthesised).
  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name("a variable name"));
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(StmtPtr s) {
    s->kind = Stmt::Kind::For;
    s->targets = parse_targets();
    if (!skip_name("in")) unexpected("'in'");
    s->expr = parse_tuple(false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail_at(cur(), "recursive loops are not supported by fish's template engine");
    expect_block_end();
    std::string end;
    ++loop_depth_;
    s->body = block_body("for", s->line, {"endfor", "else"}, end);
    --loop_depth_;
    if (end == "else") {
      expect_block_end();
      s->else_body = block_body("for", s->line, {"endfor"}, end);
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_if(StmtPtr s) {
    s->kind = Stmt::Kind::If;
    const int line = s->line;
    while (true) {
      ExprPtr cond = parse_tuple(false);
      expect_block_end();
      std::string end;
      Body b = block_body("if", line, {"elif", "else", "endif"}, end);
      s->branches.emplace_back(std::move(cond), std::move(b));
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        s->else_body = block_body("if", line, {"endif"}, end);
      }
      expect_block_end();
      return s;
    }
  }

  StmtPtr parse_set(StmtPtr s) {
    // set ns.attr = expr
    if (cur().type == TokenType::Name && peek().type == TokenType::Op && peek().text == ".") {
      s->kind = Stmt::Kind::Set;
      s->targets.push_back(next().text);
      next();  // .
      s->text = expect_name("an attribute name");
      expect_op("=");
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    s->targets = parse_targets();
    if (skip_op("=")) {
      s->kind = Stmt::Kind::Set;
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    // Block set: {% set x %}...{% endset %}, optionally {% set x | filter %}.
    s->kind = Stmt::Kind::SetBlock;
    if (s->targets.size() != 1) fail_at(cur(), "a block set assigns exactly one name");
    if (is_op("|")) s->expr = parse_filter_chain();
    expect_block_end();
    std::string end;
    s->body = block_body("set", s->line, {"endset"}, end);
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro(StmtPtr s) {
    s->kind = Stmt::Kind::Macro;
    s->text = expect_name("a macro name");
    expect_op("(");
    bool any_default = false;
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      const Token& pt = cur();
      std::string pname = expect_name("a parameter name");
      ExprPtr def;
      if (skip_op("=")) {
        def = parse_expression(true);
        any_default = true;
      } else if (any_default) {
        fail_at(pt, "non-default argument '" + pname + "' follows default argument");
      }
      s->params.emplace_back(std::move(pname), std::move(def));
    }
    next();  // )
    expect_block_end();
    std::string end;
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;  // a macro body is not inside the enclosing loop
    s->body = block_body("macro", s->line, {"endmacro"}, end);
    loop_depth_ = saved_loops;
    if (cur().type == TokenType::Name && cur().text == s->text) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block(StmtPtr s) {
    s->kind = Stmt::Kind::Filter;
    s->expr = parse_filter_chain(false);
    expect_block_end();
    std::string end;
    s->body = block_body("filter", s->line, {"endfilter"}, end);
    expect_block_end();
    return s;
  }

  StmtPtr parse_with(StmtPtr s) {
    s->kind = Stmt::Kind::With;
    while (cur().type != TokenType::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      std::string n = expect_name("a variable name");
      expect_op("=");
      s->params.emplace_back(std::move(n), parse_expression(true));
    }
    expect_block_end();
    std::string end;
    s->body = block_body("with", s->line, {"endwith"}, end);
    expect_block_end();
    return s;
  }

  // "| f(args) | g" (or "f | g" after {% filter %}) applied to the block's text.
  ExprPtr parse_filter_chain(bool leading_pipe = true) {
    ExprPtr e = node(Expr::Kind::BlockInput, cur());
    bool first = true;
    while (first ? (!leading_pipe || is_op("|")) : is_op("|")) {
      if (!first || leading_pipe) expect_op("|");
      first = false;
      e = parse_filter(std::move(e));
    }
    return e;
  }

  // --- expressions ---
  // a, b, c -> Tuple; a -> a. `cond` allows the inline if (off where `if` means
  // something else: a for loop's filter, an if tag's condition).
  ExprPtr parse_tuple(bool cond, bool in_parens = false) {
    const Token& at = cur();
    std::vector<ExprPtr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        comma = true;
      }
      if (in_parens && is_op(")")) break;
      if (!in_parens && !items.empty() && ends_tuple()) break;
      items.push_back(parse_expression(cond));
    }
    if (items.empty() && !in_parens) unexpected("an expression");
    if (items.size() == 1 && !comma) return std::move(items[0]);
    ExprPtr t = node(Expr::Kind::Tuple, at);
    for (auto& i : items) add(t, std::move(i));
    return t;
  }

  bool ends_tuple() const {
    const Token& t = cur();
    return t.type == TokenType::VarEnd || t.type == TokenType::BlockEnd || t.type == TokenType::Eof ||
           (t.type == TokenType::Op && (t.text == ")" || t.text == "]" || t.text == "}"));
  }

  ExprPtr parse_expression(bool cond) {
    Guard g(*this, nesting_, kMaxNesting, "expressions");
    return cond ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const Token& at = next();
      ExprPtr c = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) {
        Guard g(*this, nesting_, kMaxNesting, "expressions");
        otherwise = parse_condexpr();
      }
      ExprPtr n = node(Expr::Kind::Cond, at);
      add(n, std::move(e));
      add(n, std::move(c));
      add(n, std::move(otherwise));
      e = std::move(n);
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Token& at = next();
      e = binary(Expr::Kind::Or, at, std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Token& at = next();
      e = binary(Expr::Kind::And, at, std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Guard g(*this, nesting_, kMaxNesting, "expressions");
      const Token& at = next();
      return unary(Expr::Kind::Not, at, parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      const Token& t = cur();
      if (t.type == TokenType::Op &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        op = t.text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Kind::Compare, at);
        add(cmp, std::move(first));
      }
      cmp->ops.push_back(op);
      add(cmp, parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = next();
      e = binary(Expr::Kind::Binary, at, std::move(e), parse_concat(), at.text);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Token& at = next();
      e = binary(Expr::Kind::Binary, at, std::move(e), parse_math2(), "~");
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = next();
      e = binary(Expr::Kind::Binary, at, std::move(e), parse_pow(), at.text);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const Token& at = next();
      e = binary(Expr::Kind::Binary, at, std::move(e), parse_unary(true), "**");
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Guard g(*this, nesting_, kMaxNesting, "expressions");
      const Token& at = next();
      e = unary(at.text == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, at, parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::Name: {
        next();
        ExprPtr e = node(Expr::Kind::Literal, t);
        if (t.text == "true" || t.text == "True") e->value = Value(true);
        else if (t.text == "false" || t.text == "False") e->value = Value(false);
        else if (t.text == "none" || t.text == "None") e->value = Value::none();
        else {
          e->kind = Expr::Kind::Name;
          e->name = t.text;
        }
        return e;
      }
      case TokenType::String: {
        // Adjacent literals join, as in Python: "a" "b" == "ab".
        std::string s;
        while (cur().type == TokenType::String) s += next().text;
        ExprPtr e = node(Expr::Kind::Literal, t);
        e->value = Value(std::move(s));
        return e;
      }
      case TokenType::Int: {
        next();
        ExprPtr e = node(Expr::Kind::Literal, t);
        e->value = Value(t.int_value);
        return e;
      }
      case TokenType::Float: {
        next();
        ExprPtr e = node(Expr::Kind::Literal, t);
        e->value = Value(t.float_value);
        return e;
      }
      case TokenType::Op:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default: break;
    }
    unexpected("an expression");
  }

  ExprPtr parse_list() {
    ExprPtr e = node(Expr::Kind::List, next());
    while (!is_op("]")) {
      if (!e->args.empty()) {
        expect_op(",");
        if (is_op("]")) break;
      }
      add(e, parse_expression(true));
    }
    next();
    return e;
  }

  ExprPtr parse_dict() {
    ExprPtr e = node(Expr::Kind::Dict, next());
    while (!is_op("}")) {
      if (!e->args.empty()) {
        expect_op(",");
        if (is_op("}")) break;
      }
      add(e, parse_expression(true));
      expect_op(":");
      add(e, parse_expression(true));
    }
    next();
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const Token& at = next();
        if (cur().type == TokenType::Int) {  // x.0 is x[0]
          ExprPtr idx = node(Expr::Kind::Literal, cur());
          idx->value = Value(next().int_value);
          ExprPtr n = node(Expr::Kind::GetItem, at);
          add(n, std::move(e));
          add(n, std::move(idx));
          e = std::move(n);
          continue;
        }
        ExprPtr n = node(Expr::Kind::GetAttr, at);
        n->name = expect_name("an attribute name");
        add(n, std::move(e));
        e = std::move(n);
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token& at = next();  // [
    Guard g(*this, nesting_, kMaxNesting, "expressions");
    ExprPtr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        if (++colons > 2) unexpected("']'");
        next();
        continue;
      }
      if (parts[colons]) unexpected("':' or ']'");
      parts[colons] = parse_expression(true);
    }
    next();  // ]
    if (colons == 0) {
      if (!parts[0]) fail_at(at, "empty subscript");
      ExprPtr n = node(Expr::Kind::GetItem, at);
      add(n, std::move(obj));
      add(n, std::move(parts[0]));
      return n;
    }
    ExprPtr n = node(Expr::Kind::Slice, at);
    add(n, std::move(obj));
    for (auto& p : parts) add(n, std::move(p));
    return n;
  }

  // (args, name=value, ...) into e->args (after those already there) and e->kwargs.
  void parse_call_args(ExprPtr& e) {
    expect_op("(");
    Guard g(*this, nesting_, kMaxNesting, "expressions");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail_at(cur(), "*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::Name && peek().type == TokenType::Op && peek().text == "=") {
        std::string n = next().text;
        next();  // =
        add_kwarg(e, std::move(n), parse_expression(true));
      } else {
        if (!e->kwargs.empty()) fail_at(cur(), "positional argument follows keyword argument");
        add(e, parse_expression(true));
      }
    }
    next();  // )
  }

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr n = node(Expr::Kind::Call, cur());
    add(n, std::move(callee));
    parse_call_args(n);
    return n;
  }

  // A dotted filter or test name: "name" or "a.b".
  std::string dotted_name(const char* what) {
    std::string n = expect_name(what);
    while (is_op(".") && peek().type == TokenType::Name) {
      next();
      n += "." + next().text;
    }
    return n;
  }

  ExprPtr parse_filter(ExprPtr input) {
    ExprPtr n = node(Expr::Kind::Filter, cur());
    n->name = dotted_name("a filter name");
    add(n, std::move(input));
    if (is_op("(")) parse_call_args(n);
    return n;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_test(ExprPtr input) {
    const Token& at = next();  // is
    const bool negated = skip_name("not");
    ExprPtr n = node(Expr::Kind::Test, cur());
    n->name = dotted_name("a test name");
    add(n, std::move(input));
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(n);
    } else if ((t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Int ||
                t.type == TokenType::Float || (t.type == TokenType::Op && (t.text == "[" || t.text == "{"))) &&
               !(t.type == TokenType::Name && (t.text == "else" || t.text == "or" || t.text == "and" ||
                                               t.text == "if" || t.text == "in" || t.text == "not"))) {
      // One argument without parentheses: `x is divisibleby 3`, `x is sameas false`.
      if (t.type == TokenType::Name && t.text == "is") fail_at(t, "tests cannot be chained with 'is'");
      add(n, parse_postfix(parse_primary()));
    }
    if (negated) return unary(Expr::Kind::Not, at, std::move(n));
    return n;
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int block_depth_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<OpenBlock> open_;
};

}  // namespace

Template parse(std::string_view source) { return Parser(tokenize(source)).parse_template(); }

}  // namespace fish::chat::jinja
