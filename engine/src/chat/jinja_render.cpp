// The template interpreter (see jinja_render.h).
#include "chat/jinja_render.h"

#include <memory>
#include <new>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_globals.h"
#include "chat/jinja_methods.h"
#include "chat/jinja_ops.h"

namespace fish::chat::jinja {

namespace {

// Nested eval/exec calls of one rendering: bounds the C++ stack whatever the
// shape of the template (deep blocks inside deep expressions inside macros).
constexpr int kMaxRecursion = 1000;  // at most ~0.7 MiB of stack (measured: 1500 levels fit in 1 MiB)

// A variable scope. Parents are shared because a macro keeps (weakly) the
// scope it was defined in.
struct Frame {
  explicit Frame(std::shared_ptr<Frame> p = nullptr) : parent(std::move(p)) {}

  const Value* find(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent.get())
      for (const auto& [k, v] : f->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, x] : vars)
      if (k == name) {
        x = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }

  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;
};

using FramePtr = std::shared_ptr<Frame>;

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  explicit Renderer(const RenderContext& ctx) : globals_(std::make_shared<Frame>()) {
    globals_->vars = make_globals(ctx.now);
    for (const auto& [k, v] : ctx.vars) globals_->set(k, v);  // the caller's variables shadow the globals
  }

  std::string run(const Template& tpl) {
    std::string out;
    out_ = &out;
    auto top = std::make_shared<Frame>(globals_);
    exec_body(tpl.body, top);
    return out;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(int& d) : d_(d) {
      if (++d_ > kMaxRecursion)
        runtime_error("template nesting too deep at run time (over " + std::to_string(kMaxRecursion) + " levels)");
    }
    ~DepthGuard() { --d_; }
    int& d_;
  };

  // Output goes to *out_; macros and block captures point it elsewhere.
  struct Capture {
    Capture(Renderer& r, std::string& buf) : r_(r), saved_(r.out_) { r.out_ = &buf; }
    ~Capture() { r_.out_ = saved_; }
    Renderer& r_;
    std::string* saved_;
  };

  void emit(const std::string& s) {
    check_string_size(out_->size() + s.size());
    out_->append(s);
  }

  // --- statements ---
  Flow exec_body(const Body& body, const FramePtr& f) {
    for (const StmtPtr& s : body) {
      const Flow fl = exec(*s, f);
      if (fl != Flow::Normal) return fl;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s, const FramePtr& f) {
    DepthGuard g(depth_);
    try {
      return exec_inner(s, f);
    } catch (const Error& e) {
      if (e.kind() == Error::Kind::Raised || e.has_position()) throw;
      throw e.at(s.line, s.col);
    }
  }

  Flow exec_inner(const Stmt& s, const FramePtr& f) {
    switch (s.kind) {
      case Stmt::Kind::Text: emit(s.text); return Flow::Normal;
      case Stmt::Kind::Output: emit(to_str(eval(*s.expr, f))); return Flow::Normal;
      case Stmt::Kind::If:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond, f))) return exec_body(body, f);
        return exec_body(s.else_body, f);
      case Stmt::Kind::For: return exec_for(s, f);
      case Stmt::Kind::Set: exec_set(s, f); return Flow::Normal;
      case Stmt::Kind::SetBlock: {
        Value v(capture(s.body, f));
        if (s.expr) v = apply_block_filters(*s.expr, std::move(v), f);
        f->set(s.targets[0], std::move(v));
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: define_macro(s, f); return Flow::Normal;
      case Stmt::Kind::Filter:
        emit(to_str(apply_block_filters(*s.expr, Value(capture(s.body, f)), f)));
        return Flow::Normal;
      case Stmt::Kind::With: {
        // The values are computed in the enclosing scope: with a = 1, b = a
        // gives b the outer a, as jinja2 does.
        auto inner = std::make_shared<Frame>(f);
        for (const auto& [name, e] : s.params) inner->set(name, eval(*e, f));
        return exec_body(s.body, inner);
      }
      case Stmt::Kind::Scope: return exec_body(s.body, f);
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  std::string capture(const Body& body, const FramePtr& f) {
    std::string buf;
    Capture c(*this, buf);
    exec_body(body, f);
    return buf;
  }

  Value apply_block_filters(const Expr& chain, Value input, const FramePtr& f) {
    Value saved = std::move(block_input_);
    block_input_ = std::move(input);
    Value out = eval(chain, f);
    block_input_ = std::move(saved);
    return out;
  }

  // Binds `for a, b in ...` / `set a, b = ...` targets.
  void bind(Frame& fr, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      fr.set(targets[0], v);
      return;
    }
    const std::vector<Value> parts = iterate(v);
    if (parts.size() != targets.size()) {
      if (parts.size() > targets.size())
        runtime_error("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
      runtime_error("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                    std::to_string(parts.size()) + ")");
    }
    for (size_t i = 0; i < targets.size(); ++i) fr.set(targets[i], parts[i]);
  }

  void count_iteration() {
    if (++iterations_ > kMaxIterations)
      runtime_error("more than " + std::to_string(kMaxIterations) + " loop iterations in one rendering");
  }

  Value loop_object(size_t i, const std::vector<Value>& items) {
    const int64_t n = int64_t(items.size()), k = int64_t(i);
    DictData d;
    d.entries.reserve(12);
    auto put = [&](const char* name, Value v) { d.entries.emplace_back(Value(name), std::move(v)); };
    put("index", Value(k + 1));
    put("index0", Value(k));
    put("revindex", Value(n - k));
    put("revindex0", Value(n - k - 1));
    put("first", Value(k == 0));
    put("last", Value(k == n - 1));
    put("length", Value(n));
    put("depth", Value(1));
    put("depth0", Value(0));
    if (i > 0) put("previtem", items[i - 1]);
    if (i + 1 < items.size()) put("nextitem", items[i + 1]);
    put("cycle", Value::function("loop.cycle", [k](CallArgs& a) {
          if (a.args.empty()) runtime_error("no items for cycling given");
          return a.args[size_t(k) % a.args.size()];
        }));
    return Value::dict(std::move(d));
  }

  Flow exec_for(const Stmt& s, const FramePtr& f) {
    std::vector<Value> items = iterate(eval(*s.expr, f));
    if (s.cond) {
      // The `if` filter runs before the loop, so loop.length and loop.last
      // count only the items that pass (jinja2 does the same).
      std::vector<Value> kept;
      for (Value& item : items) {
        count_iteration();
        auto probe = std::make_shared<Frame>(f);
        bind(*probe, s.targets, item);
        if (truthy(eval(*s.cond, probe))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      auto inner = std::make_shared<Frame>(f);
      return exec_body(s.else_body, inner);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      count_iteration();
      auto inner = std::make_shared<Frame>(f);
      bind(*inner, s.targets, items[i]);
      inner->set("loop", loop_object(i, items));
      if (exec_body(s.body, inner) == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void exec_set(const Stmt& s, const FramePtr& f) {
    Value v = eval(*s.expr, f);
    if (s.text.empty()) {
      bind(*f, s.targets, v);
      return;
    }
    // {% set ns.attr = v %}: only a namespace takes attributes.
    const Value* target = f->find(s.targets[0]);
    if (!target || !target->is_namespace()) runtime_error("cannot assign attribute on non-namespace object");
    if (holds_namespace(v)) runtime_error("a namespace cannot hold a namespace");
    target->ns().attrs.set(Value(s.text), std::move(v));
  }

  void define_macro(const Stmt& s, const FramePtr& f) {
    std::weak_ptr<Frame> home = f;
    const Stmt* def = &s;
    f->set(s.text, Value::function(s.text, [this, def, home](CallArgs& a) { return call_macro(*def, home, a); }));
  }

  Value call_macro(const Stmt& s, const std::weak_ptr<Frame>& home, CallArgs& a) {
    FramePtr parent = home.lock();
    if (!parent) runtime_error("macro '" + s.text + "' called after the scope it was defined in ended");
    if (call_depth_ >= kMaxCallDepth)
      runtime_error("macro calls nested deeper than " + std::to_string(kMaxCallDepth) + " levels");
    struct CallDepth {
      explicit CallDepth(int& d) : d_(++d) {}
      ~CallDepth() { --d_; }
      int& d_;
    } depth(call_depth_);
    auto fr = std::make_shared<Frame>(parent);
    const size_t n_params = s.params.size();
    std::vector<bool> given(n_params, false);
    std::vector<Value> extra;
    for (size_t i = 0; i < a.args.size(); ++i) {
      if (i < n_params) {
        fr->set(s.params[i].first, a.args[i]);
        given[i] = true;
      } else {
        extra.push_back(a.args[i]);
      }
    }
    DictData extra_kw;
    for (const auto& [k, v] : a.kwargs) {
      size_t i = 0;
      while (i < n_params && s.params[i].first != k) ++i;
      if (i == n_params) {
        extra_kw.set(Value(k), v);
        continue;
      }
      if (given[i]) runtime_error("macro '" + s.text + "' got multiple values for argument '" + k + "'");
      fr->set(k, v);
      given[i] = true;
    }
    for (size_t i = 0; i < n_params; ++i) {
      if (given[i]) continue;
      const auto& [name, def] = s.params[i];
      fr->set(name, def ? eval(*def, fr) : Value::undefined("parameter '" + name + "' was not provided"));
    }
    fr->set("varargs", Value::tuple(std::move(extra)));
    fr->set("kwargs", Value::dict(std::move(extra_kw)));
    return Value(capture(s.body, fr));
  }

  // --- expressions ---
  Value eval(const Expr& e, const FramePtr& f) {
    DepthGuard g(depth_);
    try {
      return eval_inner(e, f);
    } catch (const Error& err) {
      if (err.kind() == Error::Kind::Raised || err.has_position()) throw;
      throw err.at(e.line, e.col);
    }
  }

  CallArgs call_args(const Expr& e, size_t first, const FramePtr& f) {
    CallArgs a;
    a.args.reserve(e.args.size() - first);
    for (size_t i = first; i < e.args.size(); ++i) a.args.push_back(eval(*e.args[i], f));
    for (const auto& [k, x] : e.kwargs) a.kwargs.emplace_back(k, eval(*x, f));
    return a;
  }

  Value eval_call(const Expr& e, const FramePtr& f) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::GetAttr) {
      // obj.method(...) calls the method directly, without a bound value.
      Value obj = eval(*callee.args[0], f);
      if (!obj.is_undefined() && method_kind(obj, callee.name) == MethodKind::Safe) {
        CallArgs a = call_args(e, 1, f);
        return call_method(obj, callee.name, a);
      }
      Value fn = get_attr(obj, callee.name);
      CallArgs a = call_args(e, 1, f);
      return call_value(fn, a);
    }
    Value fn = eval(callee, f);
    CallArgs a = call_args(e, 1, f);
    return call_value(fn, a);
  }

  bool compare_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in") return contains(b, a);
    if (op == "not in") return !contains(b, a);
    const int c = compare(a, b, op.c_str());
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  Value eval_inner(const Expr& e, const FramePtr& f) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: {
        if (const Value* v = f->find(e.name)) return *v;
        return Value::undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::GetAttr: return get_attr(eval(*e.args[0], f), e.name);
      case Expr::Kind::GetItem: return get_item(eval(*e.args[0], f), eval(*e.args[1], f));
      case Expr::Kind::Slice: {
        Value obj = eval(*e.args[0], f);
        Value b[3];
        for (int i = 0; i < 3; ++i) b[i] = e.args[size_t(i) + 1] ? eval(*e.args[size_t(i) + 1], f) : Value::none();
        return slice(obj, b[0], b[1], b[2]);
      }
      case Expr::Kind::Call: return eval_call(e, f);
      case Expr::Kind::Filter: {
        Value in = eval(*e.args[0], f);
        CallArgs a = call_args(e, 1, f);
        return apply_filter(e.name, in, a);
      }
      case Expr::Kind::Test: {
        Value in = eval(*e.args[0], f);
        CallArgs a = call_args(e, 1, f);
        return Value(apply_test(e.name, in, a));
      }
      case Expr::Kind::Not: return Value(!truthy(eval(*e.args[0], f)));
      case Expr::Kind::Neg: return negate(eval(*e.args[0], f));
      case Expr::Kind::Pos: {
        Value v = eval(*e.args[0], f);
        if (v.is_undefined()) fail_undefined(v);
        if (!v.is_number()) runtime_error("bad operand type for unary +: '" + v.type_name() + "'");
        return v.is_bool() ? Value(v.as_int()) : v;
      }
      case Expr::Kind::Binary: return binary_op(e.name, eval(*e.args[0], f), eval(*e.args[1], f));
      case Expr::Kind::Compare: {
        Value left = eval(*e.args[0], f);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], f);
          if (!compare_op(e.ops[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::And: {
        Value l = eval(*e.args[0], f);
        return truthy(l) ? eval(*e.args[1], f) : l;
      }
      case Expr::Kind::Or: {
        Value l = eval(*e.args[0], f);
        return truthy(l) ? l : eval(*e.args[1], f);
      }
      case Expr::Kind::Cond:
        if (truthy(eval(*e.args[1], f))) return eval(*e.args[0], f);
        if (e.args[2]) return eval(*e.args[2], f);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        std::vector<Value> items;
        items.reserve(e.args.size());
        for (const ExprPtr& x : e.args) items.push_back(eval(*x, f));
        return e.kind == Expr::Kind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
      }
      case Expr::Kind::Dict: {
        DictData d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i], f);
          if (k.is_list() && !k.is_tuple()) runtime_error("unhashable type: 'list'");
          if (k.is_dict()) runtime_error("unhashable type: 'dict'");
          d.set(std::move(k), eval(*e.args[i + 1], f));
        }
        return Value::dict(std::move(d));
      }
      case Expr::Kind::BlockInput: return block_input_;
    }
    return Value();
  }

  FramePtr globals_;
  std::string* out_ = nullptr;
  Value block_input_;
  int depth_ = 0;
  int call_depth_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace

std::string render(const Template& tpl, const RenderContext& ctx) {
  try {
    return Renderer(ctx).run(tpl);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(Error::Kind::Runtime, "out of memory while rendering");
  } catch (const std::exception& e) {
    throw Error(Error::Kind::Runtime, e.what());
  }
}

}  // namespace fish::chat::jinja
