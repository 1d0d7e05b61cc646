// Tool-call formats of chat templates: see tool_format.h.
#include "serve/tool_format.h"

namespace fish::serve {

using json = nlohmann::ordered_json;

ToolFamily detect_tool_family(std::string_view src) {
  const auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  // Markers first: each is written out by its family's template alone.
  if (has("<tool_call>")) return ToolFamily::kHermes;      // Qwen2.5 / Qwen3 / QwQ's instructions
  if (has("[TOOL_CALLS]")) return ToolFamily::kMistral;    // Mistral Nemo writes past calls so
  if (has("<|tool_call|>")) return ToolFamily::kGranite;   // Granite 3.3's system prompt
  // Llama 3.1 / 3.2 ask for {"name": function name, "parameters": ...} in a
  // header-delimited conversation.
  if (has("<|start_header_id|>") && has("\"parameters\": ")) return ToolFamily::kLlama3;
  return ToolFamily::kNone;
}

const char* tool_family_name(ToolFamily f) {
  switch (f) {
    case ToolFamily::kHermes: return "hermes";
    case ToolFamily::kLlama3: return "llama3";
    case ToolFamily::kMistral: return "mistral";
    case ToolFamily::kGranite: return "granite";
    case ToolFamily::kNone: break;
  }
  return "none";
}

std::string tool_call_open(ToolFamily f) {
  switch (f) {
    case ToolFamily::kHermes: return "<tool_call>";
    case ToolFamily::kMistral: return "[TOOL_CALLS]";
    case ToolFamily::kGranite: return "<|tool_call|>";
    default: return "";
  }
}

std::string tool_call_forced_prefix(ToolFamily f) {
  // Hermes templates show the object on the line after the tag.
  return f == ToolFamily::kHermes ? "<tool_call>\n" : tool_call_open(f);
}

std::vector<std::string> tool_call_marker_texts(ToolFamily f) {
  switch (f) {
    case ToolFamily::kHermes: return {"<tool_call>", "</tool_call>"};
    case ToolFamily::kLlama3: return {"<|python_tag|>"};
    case ToolFamily::kMistral: return {"[TOOL_CALLS]"};
    case ToolFamily::kGranite: return {"<|tool_call|>"};
    case ToolFamily::kNone: break;
  }
  return {};
}

namespace {

// Rewrites every local "$ref" ("#", "#/...") of a schema embedded at JSON
// pointer `at` so it points into the embedded copy. Values of const / enum /
// default / examples are data, not schemas: left alone.
void rebase_refs(json& s, const std::string& at) {
  if (s.is_array()) {
    for (json& x : s) rebase_refs(x, at);
    return;
  }
  if (!s.is_object()) return;
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (k == "const" || k == "enum" || k == "default" || k == "examples") continue;
    if (k == "$ref" && it->is_string()) {
      const std::string r = it->get<std::string>();
      if (r == "#" || r.rfind("#/", 0) == 0) *it = "#" + at + r.substr(1);
      continue;
    }
    rebase_refs(*it, at);
  }
}

}  // namespace

json forced_tool_schema(ToolFamily f, const std::vector<const json*>& tools, bool parallel) {
  const bool array = f == ToolFamily::kMistral || f == ToolFamily::kGranite;
  const char* args_key = f == ToolFamily::kLlama3 ? "parameters" : "arguments";
  const std::string base = array ? "/items/anyOf/" : "/anyOf/";
  json alts = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& fn = (*tools[i])["function"];
    json params = json::object();  // no parameters: an empty object
    if (auto p = fn.find("parameters"); p != fn.end() && !p->is_null()) params = *p;
    rebase_refs(params, base + std::to_string(i) + "/properties/" + args_key);
    alts.push_back(json{{"type", "object"},
                        {"properties", {{"name", {{"const", fn["name"]}}}, {args_key, std::move(params)}}},
                        {"required", {"name", args_key}}});
  }
  json one{{"anyOf", std::move(alts)}};
  if (!array) return one;
  json arr{{"type", "array"}, {"items", std::move(one)}, {"minItems", 1}};
  if (!parallel) arr["maxItems"] = 1;
  return arr;
}

}  // namespace fish::serve
