// Llama 3.1's built-in tool calls, as Meta's prompt format has the model
// write them after <|python_tag|>:
//
//   brave_search.call(query="weather in Paris")
//   wolfram_alpha.call(query="integral of x^2")
//
// that is a Python call of NAME.call with keyword arguments whose values are
// Python literals. This reads one into a tool call: the name, and the
// arguments as a JSON object ({"query": "weather in Paris"}). Python's own
// spelling is what the model learnt, so the values are read as Python reads
// them (its string escapes, True / None); JSON's true / false / null are
// taken too, as llama.cpp reads the values as JSON. Anything that is not
// such a call (positional arguments, an expression, a repeated keyword, text
// after the closing parenthesis) is no call: the caller keeps it as text.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace fish::serve {

// Whether s (the text after the tag, from its first non-space) opens a call
// "NAME.call(": kYes once all of that is there, kMaybe while what is there
// could still become it (a stream cut short), kNo when it cannot. NAME is a
// Python identifier of ASCII letters, digits and '_' (not first a digit), at
// most 64 long (OpenAI's limit on a function name), so the answer never
// needs more than 70 bytes of s.
enum class CallHead { kNo, kMaybe, kYes };
CallHead python_call_head(std::string_view s);

struct PythonCall {
  std::string name;
  nlohmann::ordered_json arguments;  // an object: keyword -> value, in the model's order
};

// All of s (whitespace around it allowed) as NAME.call(key=value, ...), or
// nullopt. Values: strings ('...', "...", triple-quoted, r / u prefixes,
// adjacent ones joined; escapes as Python's: \n \t \\ \' \" \xhh \uXXXX
// \UXXXXXXXX octal, an unknown escape kept with its backslash), decimal
// numbers, True / False / None (and true / false / null), lists and dicts
// with string keys, nested at most max_depth deep (the call counts one).
std::optional<PythonCall> parse_python_call(std::string_view s, int max_depth);

}  // namespace fish::serve
