// The tool fields of chat requests: see tool_request.h.
#include "serve/tool_request.h"

#include <cstdint>

#include "fish/fish.h"
#include "serve/openai_request.h"

namespace fish::serve {

using json = nlohmann::ordered_json;

namespace {

// JSON as Python's json.dumps writes it (", " and ": " between items), as the
// models were shown their calls; nesting is bounded by the request's depth.
std::string python_json(const json& v) {
  if (v.is_object()) {
    std::string out = "{";
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (out.size() > 1) out += ", ";
      out += json(it.key()).dump() + ": " + python_json(it.value());
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (const json& x : v) {
      if (out.size() > 1) out += ", ";
      out += python_json(x);
    }
    return out + "]";
  }
  return v.dump();
}

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

}  // namespace

std::optional<ApiError> parse_tool_fields(const json& body, ToolRequest* out) {
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) return bad("tools", "'tools' must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      const json* type = t.is_object() ? field(t, "type") : nullptr;
      if (!type || *type != "function")
        return bad("tools", "'" + at + "' must be an object with 'type': 'function'");
      const json* fn = field(t, "function");
      if (!fn || !fn->is_object()) return bad("tools", "'" + at + ".function' must be an object");
      const json* name = field(*fn, "name");
      if (!name || !name->is_string() || name->get<std::string>().empty())
        return bad("tools", "'" + at + ".function.name' must be a non-empty string");
      if (const json* p = field(*fn, "parameters"); p && !p->is_object())
        return bad("tools", "'" + at + ".function.parameters' must be an object (a JSON Schema)");
    }
    out->tools = *tools;
  }
  if (const json* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) return bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    out->parallel = p->get<bool>();
  }
  const json* c = field(body, "tool_choice");
  if (!c) return std::nullopt;
  if (c->is_string()) {
    const std::string s = c->get<std::string>();
    if (s == "auto") out->choice = ToolRequest::Choice::kAuto;
    else if (s == "none") out->choice = ToolRequest::Choice::kNone;
    else if (s == "required") out->choice = ToolRequest::Choice::kRequired;
    else return bad("tool_choice", "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  } else {
    const json* type = c->is_object() ? field(*c, "type") : nullptr;
    const json* fn = c->is_object() ? field(*c, "function") : nullptr;
    const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    if (!type || *type != "function" || !name || !name->is_string())
      return bad("tool_choice", "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    out->choice = ToolRequest::Choice::kNamed;
    out->name = name->get<std::string>();
    bool known = false;
    for (const json& t : out->tools) known = known || t["function"]["name"] == out->name;
    if (!known)
      return bad("tool_choice", "'tool_choice' names the function '" + out->name + "', which is not one of 'tools'");
  }
  if (out->forced() && out->tools.empty())
    return bad("tool_choice", "'tool_choice' forces a tool call but the request has no 'tools'");
  return std::nullopt;
}

std::optional<ApiError> normalize_tool_calls(json& msg, size_t i) {
  auto it = msg.find("tool_calls");
  if (it == msg.end()) return std::nullopt;
  if (it->is_null() || (it->is_array() && it->empty())) {
    msg.erase(it);
    return std::nullopt;
  }
  const std::string param = "messages[" + std::to_string(i) + "].tool_calls";
  if (!it->is_array()) return bad(param, "'" + param + "' must be an array");
  for (size_t k = 0; k < it->size(); ++k) {
    json& call = (*it)[k];
    const std::string at = param + "[" + std::to_string(k) + "]";
    json* fn = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
    if (!fn || !fn->is_object()) return bad(param, "'" + at + ".function' must be an object");
    const json* name = field(*fn, "name");
    if (!name || !name->is_string()) return bad(param, "'" + at + ".function.name' must be a string");
    if (const json* id = field(call, "id"); id && !id->is_string()) return bad(param, "'" + at + ".id' must be a string");
    auto args = fn->find("arguments");
    if (args == fn->end() || args->is_null()) {
      (*fn)["arguments"] = json::object();
    } else if (args->is_string()) {
      json v = json::parse(args->get<std::string>(), nullptr, false);
      if (!v.is_discarded() && v.is_object()) *args = std::move(v);  // else: the string, as given
    } else if (!args->is_object()) {
      return bad(param, "'" + at + ".function.arguments' must be a JSON string (or an object)");
    }
  }
  return std::nullopt;
}

std::vector<std::string> ToolRequest::names() const {
  std::vector<std::string> out;
  for (const json& t : tools) out.push_back(t["function"]["name"].get<std::string>());  // checked when parsed
  return out;
}

std::string mistral_tool_call_id(const std::string& id) {
  if (id.size() == 9) {
    bool ok = true;
    for (char c : id) ok = ok && is_alnum(c);
    if (ok) return id;
  }
  // FNV-1a, 64 bits, written in base 62: 9 digits hold 53 of them.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string out(9, 'a');
  for (char& c : out) {
    c = kAlnum[h % 62];
    h /= 62;
  }
  return out;
}

void adapt_tool_messages(ToolFamily f, json& messages) {
  if (f != ToolFamily::kMistral && f != ToolFamily::kGranite) return;
  for (json& m : messages) {
    if (!m.is_object()) continue;
    auto calls = m.find("tool_calls");
    if (f == ToolFamily::kMistral) {
      if (calls != m.end() && calls->is_array())
        for (json& c : *calls) {
          const json* id = field(c, "id");
          c["id"] = mistral_tool_call_id(id && id->is_string() ? id->get<std::string>() : "");
        }
      if (m.value("role", "") == "tool") {
        const json* id = field(m, "tool_call_id");
        m["tool_call_id"] = mistral_tool_call_id(id && id->is_string() ? id->get<std::string>() : "");
      }
    } else if (calls != m.end() && calls->is_array()) {
      // Written as the model writes it: name first, ", " and ": " between.
      std::string list = "[";
      for (const json& c : *calls) {
        if (list.size() > 1) list += ", ";
        const json& fn = c["function"];
        list += "{\"name\": " + fn["name"].dump() + ", \"arguments\": " + python_json(fn["arguments"]) + "}";
      }
      const json* content = field(m, "content");
      m["content"] = (content && content->is_string() ? content->get<std::string>() : "") + "<|tool_call|>" + list + "]";
      m.erase("tool_calls");
    }
  }
}

std::optional<ApiError> forced_schema_for(ToolFamily f, const ToolRequest& tr, std::string* schema) {
  std::vector<const json*> tools;
  for (size_t i = 0; i < tr.tools.size(); ++i) {
    const json& t = tr.tools[i];
    if (tr.choice == ToolRequest::Choice::kNamed && t["function"]["name"] != tr.name) continue;
    // Each tool's schema alone first, so a refusal names the tool.
    if (const json* p = field(t["function"], "parameters")) {
      fish_error* err = nullptr;
      if (fish_json_schema_check(p->dump().c_str(), &err) != 0) {
        const std::string why = fish_error_message(err);
        fish_error_free(err);
        return bad("tools", "'tools[" + std::to_string(i) + "].function.parameters': " + why +
                                " (tool_choice forces a call, so the arguments are held to this schema)");
      }
    }
    tools.push_back(&t);
  }
  *schema = forced_tool_schema(f, tools, tr.parallel).dump();
  fish_error* err = nullptr;
  if (fish_json_schema_check(schema->c_str(), &err) != 0) {
    const std::string why = fish_error_message(err);
    fish_error_free(err);
    return bad("tool_choice", "'tool_choice': the tools' schemas together are refused: " + why);
  }
  return std::nullopt;
}

}  // namespace fish::serve
