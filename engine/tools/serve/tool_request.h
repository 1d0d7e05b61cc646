// The tool fields of a chat request (OpenAI's function calling): tools,
// tool_choice, parallel_tool_calls, and the conversation's past calls
// (assistant messages with tool_calls, "tool" messages) made into what the
// real chat templates read.
//
//   tools:        [{"type": "function", "function": {"name": N, "description"?,
//                   "parameters"?: JSON Schema}}, ...]; anything else is a 400
//                   naming tools[i]
//   tool_choice:  "auto" (the default with tools), "none" (the tools are not
//                   given to the template and the reply is not parsed),
//                   "required", or {"type": "function", "function": {"name": N}}
//                   (N must be one of the tools): forced, see tool_format.h
//   parallel_tool_calls: false: at most one call is taken
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/tool_format.h"

namespace fish::serve {

struct ApiError;

struct ToolRequest {
  enum class Choice { kAuto, kNone, kRequired, kNamed };
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as given, checked
  Choice choice = Choice::kAuto;
  std::string name;       // kNamed: the function
  bool parallel = true;   // parallel_tool_calls
  bool forced() const { return choice == Choice::kRequired || choice == Choice::kNamed; }
  // Replies are parsed for calls: tools given and not "none".
  bool parse() const { return !tools.empty() && choice != Choice::kNone; }
  size_t max_calls() const { return parallel ? SIZE_MAX : 1; }
  std::vector<std::string> names() const;  // the tools' function names, in order
};

// Reads tools, tool_choice and parallel_tool_calls of a chat request body.
std::optional<ApiError> parse_tool_fields(const nlohmann::ordered_json& body, ToolRequest* out);

// A message's "tool_calls" (messages[i]) as templates read it: null or [] is
// removed (Llama 3.1's template tests 'tool_calls' in message); each call must
// be {"function": {"name": string, "arguments": string or object}}; an
// arguments string that holds a JSON object becomes that object (Llama 3.x,
// Qwen2.5 and Mistral write `arguments | tojson`, which would quote a string).
std::optional<ApiError> normalize_tool_calls(nlohmann::ordered_json& msg, size_t i);

// The family's own needs, on the messages of the template input:
//   kMistral: tool call ids must be 9 letters and digits (the template raises
//     otherwise): any other id, in tool_calls and in "tool" messages'
//     tool_call_id alike, becomes 9 derived from it (the same each time).
//   kGranite: Granite 3.3's template reads content alone: an assistant's
//     calls are written into its content as the model writes them,
//     <|tool_call|>[{"name": N, "arguments": {...}}].
void adapt_tool_messages(ToolFamily f, nlohmann::ordered_json& messages);

// tool_call_id of Mistral's template: id itself when it is 9 ASCII letters and
// digits, else 9 derived from a hash of it.
std::string mistral_tool_call_id(const std::string& id);

// The JSON Schema of a forced reply for this request (tool_format.h), or a
// 400: a tool's parameters schema fish does not enforce (naming
// tools[i].function.parameters and the keyword), or a combination the
// schema engine refuses.
std::optional<ApiError> forced_schema_for(ToolFamily f, const ToolRequest& tr, std::string* schema);

}  // namespace fish::serve
