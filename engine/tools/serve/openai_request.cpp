// OpenAI request bodies to generation parameters: see openai_request.h.
#include "serve/openai_request.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>

namespace fish::serve {

// Key order kept (the chat template writes objects back out with tojson).
using json = nlohmann::ordered_json;

ApiError bad(const std::string& param, const std::string& message) {
  ApiError e;
  e.param = param;
  e.message = message;
  return e;
}

const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

namespace {

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::optional<ApiError> get_bool(const json& body, const char* name, bool* out) {
  if (const json* v = field(body, name)) {
    if (!v->is_boolean()) return bad(name, std::string("'") + name + "' must be a boolean");
    *out = v->get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> get_number(const json& body, const char* name, double lo, double hi, float* out) {
  if (const json* v = field(body, name)) {
    if (!v->is_number()) return bad(name, std::string("'") + name + "' must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
      return bad(name, std::string("'") + name + "' must be between " + number_text(lo) + " and " + number_text(hi));
    *out = float(x);
  }
  return std::nullopt;
}

std::optional<ApiError> get_int(const json& body, const char* name, int64_t lo, int64_t hi, int64_t* out) {
  if (const json* v = field(body, name)) {
    if (!v->is_number_integer()) return bad(name, std::string("'") + name + "' must be an integer");
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      return bad(name, std::string("'") + name + "' is too large");
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi)
      return bad(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    *out = x;
  }
  return std::nullopt;
}

// The fields /v1/chat/completions and /v1/completions share.
std::optional<ApiError> parse_common(const json& body, const fish_sampler_params& defaults, bool seed_fixed,
                                     ParsedRequest* out) {
  if (!body.is_object()) return bad("", "the request body must be a JSON object");
  if (const json* v = field(body, "model"); v && !v->is_string()) return bad("model", "'model' must be a string");
  if (auto e = get_bool(body, "stream", &out->stream)) return e;
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) return bad("stream_options", "'stream_options' must be an object");
    if (auto e = get_bool(*so, "include_usage", &out->include_usage)) return e;
  }
  GenParams& g = out->gen;
  g.sampler = defaults;
  if (auto e = get_number(body, "temperature", 0, 100, &g.sampler.temp)) return e;
  if (auto e = get_number(body, "top_p", 0, 1, &g.sampler.top_p)) return e;
  if (auto e = get_number(body, "min_p", 0, 1, &g.sampler.min_p)) return e;
  if (auto e = get_number(body, "repeat_penalty", 1e-6, 100, &g.sampler.repeat_penalty)) return e;
  if (auto e = get_number(body, "presence_penalty", -2, 2, &g.sampler.presence_penalty)) return e;
  if (auto e = get_number(body, "frequency_penalty", -2, 2, &g.sampler.frequency_penalty)) return e;
  int64_t v = 0;
  if (field(body, "top_k")) {
    if (auto e = get_int(body, "top_k", -1, std::numeric_limits<int32_t>::max(), &v)) return e;
    g.sampler.top_k = int32_t(v);
  }
  if (field(body, "repeat_last_n")) {
    if (auto e = get_int(body, "repeat_last_n", -1, std::numeric_limits<int32_t>::max(), &v)) return e;
    g.sampler.repeat_last_n = int32_t(v);
  }
  if (field(body, "seed")) {
    // OpenAI's seed is any 64-bit integer; negative ones wrap.
    const json& s = body["seed"];
    if (!s.is_number_integer()) return bad("seed", "'seed' must be an integer");
    g.sampler.seed = s.is_number_unsigned() ? s.get<uint64_t>() : uint64_t(s.get<int64_t>());
  } else if (!seed_fixed) {
    g.sampler.seed = std::random_device{}();
  }
  if (field(body, "n")) {
    if (get_int(body, "n", 1, 1, &v)) return bad("n", "only 'n': 1 is supported");
  }
  if (auto e = get_bool(body, "ignore_eos", &g.ignore_eos)) return e;
  // max_tokens (or chat's newer max_completion_tokens).
  for (const char* name : {"max_tokens", "max_completion_tokens"})
    if (field(body, name)) {
      if (auto e = get_int(body, name, 0, std::numeric_limits<int32_t>::max(), &v)) return e;
      g.max_tokens = int32_t(v);
    }
  if (const json* s = field(body, "stop")) {
    if (s->is_string()) {
      g.stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      if (s->size() > 16) return bad("stop", "'stop' takes at most 16 strings");
      for (const json& x : *s) {
        if (!x.is_string()) return bad("stop", "'stop' must be a string or an array of strings");
        g.stop.push_back(x.get<std::string>());
      }
    } else {
      return bad("stop", "'stop' must be a string or an array of strings");
    }
    for (const std::string& x : g.stop)
      if (x.empty()) return bad("stop", "a stop string must not be empty");
  }
  // logit_bias: {"token id": bias in [-100, 100]}, added to the logits before
  // sampling (OpenAI's; -100 bans the token outright, 100 all but forces it). The ids
  // are checked against the vocabulary by the server (it knows its size).
  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) return bad("logit_bias", "'logit_bias' must be an object of token ids to numbers");
    if (lb->size() > 1024) return bad("logit_bias", "'logit_bias' takes at most 1024 tokens");
    for (const auto& [k, b] : lb->items()) {
      char* end = nullptr;
      const long long id = std::strtoll(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0 || id > std::numeric_limits<int32_t>::max())
        return bad("logit_bias", "'logit_bias' key '" + k + "' is not a token id");
      if (!b.is_number() || !std::isfinite(b.get<double>()) || b.get<double>() < -100 || b.get<double>() > 100)
        return bad("logit_bias", "'logit_bias' values must be numbers between -100 and 100");
      g.logit_bias.emplace_back(int32_t(id), float(b.get<double>()));
    }
  }
  // response_format: {"type": "text"} (the default), "json_object" (JSON
  // mode: fish_sampler_constrain_json) or OpenAI's "json_schema" with
  // {"name", "schema", "strict"} (fish_sampler_constrain_json_schema; the
  // schema is held to whatever "strict" says, and one fish does not enforce
  // is a 400 naming the keyword, never ignored). llama-server's
  // {"type": "json_object", "schema": {...}} is a schema too.
  if (const json* rf = field(body, "response_format")) {
    const json* type = rf->is_object() ? field(*rf, "type") : nullptr;
    if (!type || !type->is_string())
      return bad("response_format", "'response_format' must be an object with a string 'type'");
    const std::string t = type->get<std::string>();
    const json* schema = nullptr;
    std::string where = "response_format.schema";
    if (t == "json_object") {
      schema = field(*rf, "schema");
      if (!schema) g.json_object = true;
    } else if (t == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object())
        return bad("response_format", "'response_format' type 'json_schema' needs a 'json_schema' object");
      if (const json* n = field(*js, "name"); n && !n->is_string())
        return bad("response_format", "'response_format.json_schema.name' must be a string");
      if (const json* st = field(*js, "strict"); st && !st->is_boolean())
        return bad("response_format", "'response_format.json_schema.strict' must be a boolean");
      schema = field(*js, "schema");
      where = "response_format.json_schema.schema";
      static const json kAnyValue = json::object();  // no schema: any JSON value
      if (!schema) schema = &kAnyValue;
    } else if (t != "text") {
      return bad("response_format", "'response_format' type '" + t + "' is not one of 'text', 'json_object', 'json_schema'");
    }
    if (schema) {
      if (!schema->is_object() && !schema->is_boolean())
        return bad("response_format", "'" + where + "' must be an object");
      g.json_schema = schema->dump();
      fish_error* err = nullptr;
      if (fish_json_schema_check(g.json_schema.c_str(), &err) != 0) {
        const std::string why = fish_error_message(err);
        fish_error_free(err);
        return bad("response_format", "'" + where + "': " + why);
      }
    }
  }
  return std::nullopt;
}

// A message's content: a string, null, or an array of text parts (joined).
std::optional<ApiError> message_content(const json& c, size_t i, std::string* out) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (c.is_null()) return std::nullopt;
  if (c.is_string()) {
    *out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad(param, "'" + param + "' must be a string or an array of content parts");
  for (const json& part : c) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || !type->is_string()) return bad(param, "each part of '" + param + "' must be an object with a 'type'");
    if (type->get<std::string>() != "text")
      return bad(param, "content parts of type '" + type->get<std::string>() + "' are not supported (text only)");
    const json* text = field(part, "text");
    if (!text || !text->is_string()) return bad(param, "a text part of '" + param + "' needs a string 'text'");
    if (!out->empty()) *out += "\n";
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> get_token_ids(const json& a, const char* param, std::vector<int32_t>* out) {
  for (const json& t : a) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return bad(param, std::string("'") + param + "' token ids must be integers >= 0");
    out->push_back(int32_t(t.get<int64_t>()));
  }
  return std::nullopt;
}

// The deepest nesting of arrays and objects in a JSON text, brackets inside
// strings not counted; stops counting past `limit`.
int json_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

namespace {

template <class Json>
std::optional<ApiError> parse_body(const std::string& body, Json* out) {
  if (json_depth(body, kMaxBodyDepth) > kMaxBodyDepth)
    return bad("", "the request body nests arrays and objects more than " + std::to_string(kMaxBodyDepth) +
                       " levels deep");
  try {
    *out = Json::parse(body);
  } catch (const json::exception& e) {  // parse_error; out_of_range for a number past double's range
    std::string what = e.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    if (what.size() > 200) what = what.substr(0, 200) + "...";  // it may quote a whole token
    return bad("", "the request body is not valid JSON: " + what);
  }
  if (!out->is_object()) return bad("", "the request body must be a JSON object");
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_request_body(const std::string& body, nlohmann::json* out) {
  return parse_body(body, out);
}

std::optional<ApiError> parse_request_body(const std::string& body, nlohmann::ordered_json* out) {
  return parse_body(body, out);
}

std::optional<ApiError> parse_chat_request(const json& body, const fish_sampler_params& defaults, bool seed_fixed,
                                           ParsedRequest* out) {
  if (auto e = parse_common(body, defaults, seed_fixed, out)) return e;
  const json* msgs = field(body, "messages");
  if (!msgs) return bad("messages", "'messages' is required");
  if (!msgs->is_array() || msgs->empty()) return bad("messages", "'messages' must be a non-empty array");
  json list = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(param, "'" + param + "' must be an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) return bad(param + ".role", "'" + param + ".role' must be a string");
    std::string content;
    if (auto it = m.find("content"); it != m.end())
      if (auto e = message_content(*it, i, &content)) return e;
    json msg = m;  // other keys (name, tool_call_id) reach the template as they are
    msg["content"] = content;
    if (auto e = normalize_tool_calls(msg, i)) return e;
    list.push_back(std::move(msg));
  }
  out->template_input = json{{"messages", std::move(list)}, {"add_generation_prompt", true}};
  if (auto e = parse_tool_fields(body, &out->tools)) return e;
  // tool_choice "none": the model is not offered the tools at all.
  if (field(body, "tools") && out->tools.choice != ToolRequest::Choice::kNone)
    out->template_input["tools"] = out->tools.tools;
  bool logprobs = false;
  if (auto e = get_bool(body, "logprobs", &logprobs)) return e;
  int64_t top = 0;
  if (auto e = get_int(body, "top_logprobs", 0, 20, &top)) return e;
  if (field(body, "top_logprobs") && !logprobs) return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  out->gen.top_logprobs = logprobs ? int32_t(top) : -1;
  return std::nullopt;
}

std::optional<ApiError> parse_completion_request(const json& body, const fish_sampler_params& defaults,
                                                 bool seed_fixed, ParsedRequest* out) {
  if (auto e = parse_common(body, defaults, seed_fixed, out)) return e;
  const json* p = field(body, "prompt");
  if (!p) return bad("prompt", "'prompt' is required");
  // A list of one prompt is that prompt; several in one request are not supported.
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    out->prompt_text = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    if (auto e = get_token_ids(*p, "prompt", &out->prompt_tokens)) return e;
    out->prompt_is_tokens = true;
  } else if (p->is_array() && p->size() > 1) {
    return bad("prompt", "several prompts in one request are not supported: send one request per prompt");
  } else {
    return bad("prompt", "'prompt' must be a string or an array of token ids");
  }
  bool echo = false;
  if (auto e = get_bool(body, "echo", &echo)) return e;
  if (echo) return bad("echo", "'echo' is not supported");
  if (const json* s = field(body, "suffix"); s && (!s->is_string() || !s->get<std::string>().empty()))
    return bad("suffix", "'suffix' is not supported");
  int64_t v = 0;
  if (field(body, "best_of"))
    if (get_int(body, "best_of", 1, 1, &v)) return bad("best_of", "only 'best_of': 1 is supported");
  if (field(body, "logprobs")) {
    if (auto e = get_int(body, "logprobs", 0, 20, &v)) return e;
    out->gen.top_logprobs = int32_t(v);
  }
  return std::nullopt;
}

std::optional<ApiError> parse_embedding_request(const nlohmann::ordered_json& body, EmbeddingRequest* out) {
  const json& b = body;
  if (!b.is_object()) return bad("", "the request body must be a JSON object");
  if (const json* v = field(b, "model"); v && !v->is_string()) return bad("model", "'model' must be a string");
  if (const json* v = field(b, "encoding_format")) {
    if (!v->is_string() || (v->get<std::string>() != "float" && v->get<std::string>() != "base64"))
      return bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    out->base64 = v->get<std::string>() == "base64";
  }
  if (auto e = get_int(b, "dimensions", 1, std::numeric_limits<int32_t>::max(), &out->dimensions)) return e;
  const json* in = field(b, "input");
  if (!in) return bad("input", "'input' is required");
  const char* kShape = "'input' must be a string, an array of strings, an array of token ids or an array of arrays of token ids";
  auto one_text = [&](const json& v) -> std::optional<ApiError> {
    if (v.get_ref<const std::string&>().empty()) return bad("input", "'input' must not contain an empty string");
    EmbeddingInput e;
    e.text = v.get<std::string>();
    out->inputs.push_back(std::move(e));
    return std::nullopt;
  };
  auto one_ids = [&](const json& v) -> std::optional<ApiError> {
    if (v.empty()) return bad("input", "'input' must not contain an empty array of token ids");
    EmbeddingInput e;
    e.is_tokens = true;
    if (auto err = get_token_ids(v, "input", &e.tokens)) return err;
    out->inputs.push_back(std::move(e));
    return std::nullopt;
  };
  if (in->is_string()) {
    if (auto e = one_text(*in)) return e;
  } else if (in->is_array()) {
    if (in->empty()) return bad("input", "'input' must not be an empty array");
    if ((*in)[0].is_number()) {  // one input as token ids
      if (auto e = one_ids(*in)) return e;
    } else {
      if (in->size() > kMaxEmbeddingInputs)
        return bad("input", "'input' holds " + std::to_string(in->size()) + " inputs, more than " +
                                std::to_string(kMaxEmbeddingInputs));
      const bool texts = (*in)[0].is_string();
      for (const json& v : *in) {
        if (texts ? !v.is_string() : !v.is_array()) return bad("input", kShape);
        if (auto e = texts ? one_text(v) : one_ids(v)) return e;
      }
    }
  } else {
    return bad("input", kShape);
  }
  return std::nullopt;
}

}  // namespace fish::serve
