// Which tool-call format a chat template teaches its model, told from the
// template's own text, and what fish serve needs to know of each: the marker
// that opens a call in the model's output, and the JSON Schema that holds a
// forced call (tool_choice "required" or a named function) to the format.
//
// The families, as the real templates instruct (tests/serve/test_tool_calls.cpp
// checks the detection on them):
//   kHermes   Qwen2.5, Qwen3, QwQ: one or more
//               <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>
//   kLlama3   Llama 3.1 / 3.2: the reply is one JSON object
//               {"name": N, "parameters": {...}}, maybe after <|python_tag|>
//   kMistral  Mistral Nemo: [TOOL_CALLS][{"name": N, "arguments": {...}, "id": "abcDEF123"}, ...]
//   kGranite  Granite 3.3: <|tool_call|>[{"name": N, "arguments": {...}}, ...]
// Any other template: kNone (the reply stays text).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace fish::serve {

enum class ToolFamily { kNone, kHermes, kLlama3, kMistral, kGranite };

ToolFamily detect_tool_family(std::string_view template_source);
const char* tool_family_name(ToolFamily f);  // "none", "hermes", "llama3", "mistral", "granite"

// The text that opens a call in the model's output ("" for kLlama3, whose
// call is a bare JSON object; kNone: "").
std::string tool_call_open(ToolFamily f);
// What fish serve appends to the rendered prompt to force a call: the opening
// marker as the template shows it (Hermes: "<tool_call>\n"); "" for kLlama3.
std::string tool_call_forced_prefix(ToolFamily f);
// Marker texts that may be control tokens in a vocabulary (whose pieces are
// empty unless asked for): the server keeps their text in the output so the
// parser sees them.
std::vector<std::string> tool_call_marker_texts(ToolFamily f);

// The schema of a forced reply after tool_call_forced_prefix: for kHermes and
// kLlama3 one object {"name": <one of the tools' names>, "arguments" (Llama:
// "parameters"): <that tool's parameters schema>}; for kMistral and kGranite
// an array of such objects ("arguments"), at least one, at most one when
// !parallel. tools: OpenAI's entries ({"type": "function", "function":
// {"name", "parameters"}}), already checked; a tool without parameters takes
// {} (no keys). Local $refs inside a parameters schema ("#/$defs/X") are
// rewritten to where the schema now sits.
nlohmann::ordered_json forced_tool_schema(ToolFamily f, const std::vector<const nlohmann::ordered_json*>& tools, bool parallel);

}  // namespace fish::serve
