#include "fuzz_template.h"

#include <exception>
#include <typeinfo>
#include <vector>

#include "chat/chat_template.h"

namespace fish::fuzz {

namespace {

// The conversations every template is rendered for (fish template's JSON
// input; "now" fixed so that a rendering does not depend on the clock).
const char* const kConversations[] = {
    R"({"messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Hello"},
                     {"role": "assistant", "content": "Hi! \u00e9\u4f60\u597d"},
                     {"role": "user", "content": "  spaces\n\tand lines  "}],
        "add_generation_prompt": true, "now": "2026-12-01T12:00:00"})",
    R"({"messages": [{"role": "user", "content": "Weather in Paris?"},
                     {"role": "assistant", "content": "",
                      "tool_calls": [{"type": "function", "id": "call12345",
                                      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                     {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call12345", "name": "get_weather"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}}}],
        "add_generation_prompt": true, "now": "2026-12-01T12:00:00"})",
    R"({"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>\nsum\n</think>\n4"}],
        "add_generation_prompt": false, "enable_thinking": true, "now": "2026-12-01T12:00:00"})",
};

const std::vector<chat::ChatInput>& conversations() {
  static const std::vector<chat::ChatInput> in = [] {
    std::vector<chat::ChatInput> v;
    chat::ChatInput d;
    d.bos_token = "<s>", d.eos_token = "</s>";
    for (const char* c : kConversations) v.push_back(chat::parse_chat_input(c, d));
    return v;
  }();
  return in;
}

}  // namespace

TemplateOutcome run_template(const std::string& source) {
  TemplateOutcome o;
  try {
    const chat::ChatTemplate t(source);
    o.parsed = true;
    for (const chat::ChatInput& in : conversations()) {
      try {
        (void)t.render(in);
        ++o.rendered;
      } catch (const chat::jinja::Error&) {
      }
    }
  } catch (const chat::jinja::Error&) {
  } catch (const std::exception& e) {
    o.other = std::string(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    o.other = "an exception of unknown type";
  }
  return o;
}

TemplateOutcome run_template_bytes(const uint8_t* data, size_t size) {
  return run_template(std::string(reinterpret_cast<const char*>(data), size));
}

}  // namespace fish::fuzz
