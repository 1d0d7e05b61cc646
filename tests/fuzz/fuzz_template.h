// The chat-template fuzz target's body, shared with the regression test: every
// input is a Jinja template's source (what a GGUF's tokenizer.chat_template
// holds, untrusted), parsed as `fish chat` / `fish serve` parse it, then
// rendered for a few fixed conversations (turns and a system prompt; a tool
// schema, a tool call and its result; no generation prompt with
// enable_thinking set), as apply_chat_template would be called. A
// jinja::Error (syntax, runtime, raise_exception) is the expected refusal;
// anything else, a crash, a hang or a sanitizer report is a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace fish::fuzz {

struct TemplateOutcome {
  bool parsed = false;     // the template parsed
  int rendered = 0;        // conversations rendered without an error
  std::string other;       // the message of an exception that is not a jinja::Error ("" if none)
  bool clean() const { return other.empty(); }
};

TemplateOutcome run_template(const std::string& source);
TemplateOutcome run_template_bytes(const uint8_t* data, size_t size);

}  // namespace fish::fuzz
