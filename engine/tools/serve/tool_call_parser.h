// Tool calls out of a model's reply, as it streams: the text goes in piece by
// piece, content and whole calls come out (tool_format.h gives each family's
// format). The same object serves the non-streaming answer (all text, then
// finish()), so a streamed reply and a whole one always agree.
//
// What it decides:
//   - Text before the first call, between calls and after the last is
//     content; whitespace next to a call (the "\n" between Hermes blocks, the
//     space before a marker) is dropped.
//   - While the text might be starting a call (its end is a prefix of the
//     family's opening marker, or whitespace that may precede one) it is held
//     back; inside a call everything is held until the call is complete.
//   - A call is taken only whole and well formed: a JSON object with a string
//     "name" and an object "arguments" (Llama 3: "parameters"; Mistral may add
//     a string "id", kept). A malformed one (not JSON, the wrong shape, no
//     closing tag and more text after it, cut off at the end) goes out as
//     content, marker included: never an error.
//   - Hermes: several blocks, anywhere in the reply (Qwen3 / QwQ think first);
//     a block whose closing tag is missing at the very end is accepted.
//     Llama 3: a call only at the start of the reply (after whitespace), one
//     JSON object, maybe after <|python_tag|>. Mistral / Granite: a JSON array
//     of calls after the marker.
//   - max_calls (parallel_tool_calls false: 1): once that many calls are
//     taken, the rest of the reply is content (calls past it in one array are
//     dropped).
//   - start_in_call: the opening marker is already in the prompt (a forced
//     call), so the reply begins inside the call.
//   - Llama 3.1's built-in tools (Meta's prompt format): after <|python_tag|>
//     at the start of the reply, text that is no JSON object is either
//     NAME.call(key=value, ...) (python_call.h), a call of NAME with those
//     arguments, or code for the code interpreter: a call of the request's
//     tool named "python" (llama.cpp's name for it) or else "code_interpreter"
//     with {"code": the text}, when the request offers one; neither: text,
//     the tag included. That text runs to the end of the reply (the model
//     ends it with <|eom_id|>, a stop token), so it is held back until then;
//     without a code tool, text that cannot open NAME.call( goes out at once.
//     With a code tool, NAME.call(...) whose NAME is none of the tools (say
//     subprocess.call(args=["ls"])) is code.
//   - A call is reported whatever its name, one that is none of the
//     request's tools too, as llama-server does (its parsers ask only for a
//     non-empty name): the client sees what the model asked for, and can
//     answer it (OpenAI's runTools sends back an "Invalid tool_call" tool
//     message naming the functions there are). Dropping it, or passing it as
//     text, would hide the model's mistake in content. The one name fish
//     supplies itself, the code tool's, is used only when the request offers it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "serve/tool_format.h"

namespace fish::serve {

struct ToolCall {
  std::string id;         // "call_" + 24 random letters and digits, or the model's own (Mistral)
  std::string name;
  std::string arguments;  // the arguments object as compact JSON text (OpenAI's string)
};

// One thing to send: content text, or a whole call.
struct ToolEvent {
  bool is_call = false;
  std::string content;
  ToolCall call;
};

// Finds where a JSON array or object ends, strings and escapes honoured,
// reading text as it grows: each byte is read once however many times more
// text comes (a call streamed token by token stays linear).
class JsonScan {
 public:
  // Starts at s[start], which must be '{' or '['.
  void reset(size_t start);
  size_t start() const { return start_; }
  // Reads s from where the last call stopped; one past the value's end (the
  // same again once found), or npos when it is not complete yet.
  size_t feed(const std::string& s);
  int deepest() const { return deepest_; }  // nesting reached so far

 private:
  size_t start_ = std::string::npos, pos_ = 0, end_ = std::string::npos;
  int depth_ = 0, deepest_ = 0;
  bool in_string_ = false, escaped_ = false;
};

class ToolCallParser {
 public:
  // tool_names: the request's tools' names (which code tool it offers).
  ToolCallParser(ToolFamily family, size_t max_calls = SIZE_MAX, bool start_in_call = false,
                 std::vector<std::string> tool_names = {});

  // Adds text of the reply; returns what can go out now.
  std::vector<ToolEvent> push(const std::string& text);
  // At the end of the reply: what was held back.
  std::vector<ToolEvent> finish();
  size_t calls() const { return n_calls_; }

 private:
  // kBuiltin: Llama 3.1, after <|python_tag|>, text that is no JSON object.
  enum class State { kStart, kText, kCall, kBuiltin, kPlain };
  void run(bool at_end, std::vector<ToolEvent>* out);
  bool step_text(bool at_end, std::vector<ToolEvent>* out);
  bool step_call(bool at_end, std::vector<ToolEvent>* out);
  bool step_builtin(bool at_end, std::vector<ToolEvent>* out);
  bool offered(const std::string& name) const;
  void emit_call(ToolCall c, std::vector<ToolEvent>* out);
  void emit_content(std::string text, std::vector<ToolEvent>* out);
  void release_as_text(size_t n, std::vector<ToolEvent>* out);

  ToolFamily family_;
  std::string open_;
  size_t max_calls_;
  std::vector<std::string> tool_names_;
  std::string code_tool_;    // "python", "code_interpreter" or "" (none offered)
  State state_;
  std::string buf_;          // text not decided yet
  std::string marker_seen_;  // inside a call: the marker as it was written ("" when forced)
  JsonScan scan_;            // inside a call: the call's JSON so far
  bool after_call_ = false;  // drop whitespace until other text comes
  size_t n_calls_ = 0;
};

// "call_" + 24 random letters and digits.
std::string new_tool_call_id();

}  // namespace fish::serve
