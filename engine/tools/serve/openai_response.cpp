// OpenAI answer bodies: see openai_response.h.
#include "serve/openai_response.h"

#include <cstring>

#include "fish/fish.h"

namespace fish::serve {

using nlohmann::json;

namespace {

json or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

std::string fingerprint() { return std::string("fish-") + fish_version(); }

// What every answer and chunk carries around its choices.
json envelope(const ResponseMeta& meta, const char* object, json choices) {
  return json{{"id", meta.id},
              {"object", object},
              {"created", meta.created},
              {"model", meta.model},
              {"system_fingerprint", fingerprint()},
              {"choices", std::move(choices)}};
}

json choice_message(const ResponseMeta& meta, const std::string& text) {
  if (!meta.chat) return text;
  return json{{"role", "assistant"}, {"content", text}};
}

}  // namespace

json error_body(const ApiError& e) {
  return json{{"error", {{"message", e.message}, {"type", e.type}, {"param", or_null(e.param)}, {"code", or_null(e.code)}}}};
}

json usage_json(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json logprobs_json(bool chat, const std::vector<TokenLogprob>& lps, bool with_top, size_t* offset) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& t : lps) {
      json top = json::array();
      for (const auto& [piece, lp] : t.top) top.push_back({{"token", piece}, {"logprob", lp}, {"bytes", bytes_of(piece)}});
      content.push_back({{"token", t.piece}, {"logprob", t.logprob}, {"bytes", bytes_of(t.piece)}, {"top_logprobs", top}});
    }
    return json{{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), lp = json::array(), top = json::array(), off = json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(t.piece);
    lp.push_back(t.logprob);
    json alt = json::object();
    for (const auto& [piece, l] : t.top) alt[piece] = l;
    top.push_back(alt);
    off.push_back(*offset);
    *offset += t.piece.size();
  }
  return json{{"tokens", tokens}, {"token_logprobs", lp}, {"top_logprobs", with_top ? top : json(nullptr)}, {"text_offset", off}};
}

json tool_call_json(const ToolCall& c) {
  return json{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

json tool_call_head_delta(size_t index, const ToolCall& c) {
  return json{{"tool_calls", json::array({json{{"index", index}, {"id", c.id}, {"type", "function"},
                                               {"function", {{"name", c.name}, {"arguments", ""}}}}})}};
}

json tool_call_args_delta(size_t index, const ToolCall& c) {
  return json{{"tool_calls", json::array({json{{"index", index}, {"function", {{"arguments", c.arguments}}}}})}};
}

json full_response(const ResponseMeta& meta, const std::string& text, const std::string& finish_reason,
                   const Usage& usage, const json* lps, const std::vector<ToolCall>& calls) {
  json choice{{"index", 0}, {"logprobs", lps ? *lps : json(nullptr)}, {"finish_reason", finish_reason}};
  choice[meta.chat ? "message" : "text"] = choice_message(meta, text);
  if (meta.chat && !calls.empty()) {
    json& msg = choice["message"];
    if (text.empty()) msg["content"] = nullptr;
    msg["tool_calls"] = json::array();
    for (const ToolCall& c : calls) msg["tool_calls"].push_back(tool_call_json(c));
  }
  json c = envelope(meta, meta.chat ? "chat.completion" : "text_completion", json::array({choice}));
  c["usage"] = usage_json(usage);
  return c;
}

json stream_chunk(const ResponseMeta& meta, const std::string& text, bool first, const std::string& finish_reason,
                  const json& lps, const Usage* usage) {
  if (meta.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (first || !text.empty()) delta["content"] = text;
    return delta_chunk(meta, std::move(delta), finish_reason, lps, usage);
  }
  json choice{{"index", 0}, {"logprobs", lps}, {"finish_reason", or_null(finish_reason)}};
  choice["text"] = text;
  json c = envelope(meta, "text_completion", json::array({choice}));
  if (usage) c["usage"] = usage_json(*usage);
  return c;
}

json delta_chunk(const ResponseMeta& meta, json delta, const std::string& finish_reason, const json& lps,
                 const Usage* usage) {
  json choice{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", lps}, {"finish_reason", or_null(finish_reason)}};
  json c = envelope(meta, "chat.completion.chunk", json::array({choice}));
  if (usage) c["usage"] = usage_json(*usage);
  return c;
}

json usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json c = envelope(meta, meta.chat ? "chat.completion.chunk" : "text_completion", json::array());
  c["usage"] = usage_json(usage);
  return c;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

std::string base64_encode(const uint8_t* data, size_t n) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t(data[i]) << 16 | (i + 1 < n ? uint32_t(data[i + 1]) << 8 : 0u) |
                       (i + 2 < n ? uint32_t(data[i + 2]) : 0u);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < n ? k[(v >> 6) & 63] : '=';
    out += i + 2 < n ? k[v & 63] : '=';
  }
  return out;
}

json embeddings_response(const std::string& model, const std::vector<float>& vectors, int32_t dim, bool base64,
                         int64_t prompt_tokens) {
  json data = json::array();
  const size_t n = dim > 0 ? vectors.size() / size_t(dim) : 0;
  std::vector<uint8_t> bytes(size_t(dim) * 4);
  for (size_t i = 0; i < n; ++i) {
    const float* v = vectors.data() + i * size_t(dim);
    json e;
    if (base64) {
      for (int32_t j = 0; j < dim; ++j) {  // little-endian whatever the host's order
        uint32_t u;
        std::memcpy(&u, v + j, 4);
        for (int b = 0; b < 4; ++b) bytes[size_t(j) * 4 + size_t(b)] = uint8_t(u >> (8 * b));
      }
      e = base64_encode(bytes.data(), bytes.size());
    } else {
      e = json::array();
      for (int32_t j = 0; j < dim; ++j) e.push_back(v[j]);
    }
    data.push_back(json{{"object", "embedding"}, {"index", i}, {"embedding", std::move(e)}});
  }
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace fish::serve
