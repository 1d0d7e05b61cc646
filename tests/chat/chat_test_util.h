// Helpers for the chat template tests: render a template source with the
// variables of a JSON object, or get the error it fails with. strftime_now is
// fixed at 2026-12-01 12:00:00, the time the reference renderings used.
//
// Expected outputs in these tests are what Python's jinja2 3.1 renders in
// Hugging Face's environment (sandboxed, trim_blocks, lstrip_blocks,
// loopcontrols, tojson = json.dumps(ensure_ascii=False)).
#pragma once
#include <optional>
#include <string>

#include "chat/jinja_error.h"
#include "chat/jinja_json.h"
#include "chat/jinja_parser.h"
#include "chat/jinja_render.h"

namespace fish::test {

inline std::string render(const std::string& src, const std::string& vars = "{}") {
  namespace j = fish::chat::jinja;
  j::RenderContext ctx;
  const j::Value v = j::parse_json(vars);
  for (const auto& [k, x] : v.dict().entries) ctx.vars.emplace_back(k.get_string(), x);
  ctx.now = j::DateTime{2026, 12, 1, 12, 0, 0, 0};
  return j::render(j::parse(src), ctx);
}

struct Failure {
  fish::chat::jinja::Error::Kind kind;
  std::string message;  // what()
  int line, col;
};

// The error rendering fails with; nullopt when it renders.
inline std::optional<Failure> failure(const std::string& src, const std::string& vars = "{}") {
  try {
    render(src, vars);
  } catch (const fish::chat::jinja::Error& e) {
    return Failure{e.kind(), e.what(), e.line(), e.column()};
  }
  return std::nullopt;
}

inline bool is_syntax(const std::optional<Failure>& f) {
  return f && f->kind == fish::chat::jinja::Error::Kind::Syntax;
}
inline bool is_runtime(const std::optional<Failure>& f) {
  return f && f->kind == fish::chat::jinja::Error::Kind::Runtime;
}

}  // namespace fish::test
