// The OpenAI answer bodies fish serve writes: whole responses, stream chunks
// (server-sent events), error objects, usage and logprobs in both the chat
// and the completions shape.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/job.h"
#include "serve/openai_request.h"
#include "serve/tool_call_parser.h"

namespace fish::serve {

struct ResponseMeta {
  bool chat = false;   // chat.completion(.chunk) or text_completion
  std::string id;      // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created = 0; // Unix seconds
};

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const ApiError& e);
nlohmann::json usage_json(const Usage& u);
// Logprobs of tokens, as chat ({"content": [...]}) or completions ({"tokens",
// "token_logprobs", "top_logprobs", "text_offset"}) want them; *offset: the
// completion text's length before these tokens (advanced past them).
nlohmann::json logprobs_json(bool chat, const std::vector<TokenLogprob>& lps, bool with_top, size_t* offset);

// The non-streaming answer. lps: null when logprobs were not asked for.
// calls (chat): message.tool_calls, and content null when it is empty.
nlohmann::json full_response(const ResponseMeta& meta, const std::string& text, const std::string& finish_reason,
                             const Usage& usage, const nlohmann::json* lps, const std::vector<ToolCall>& calls = {});
// {"id", "type": "function", "function": {"name", "arguments"}}
nlohmann::json tool_call_json(const ToolCall& c);
// The two stream deltas of one call, as OpenAI streams them: first
// {"tool_calls": [{"index", "id", "type", "function": {"name", "arguments": ""}}]},
// then {"tool_calls": [{"index", "function": {"arguments": <text>}}]}.
nlohmann::json tool_call_head_delta(size_t index, const ToolCall& c);
nlohmann::json tool_call_args_delta(size_t index, const ToolCall& c);
// A chat stream chunk with this delta object (stream_chunk builds the text ones).
nlohmann::json delta_chunk(const ResponseMeta& meta, nlohmann::json delta, const std::string& finish_reason,
                           const nlohmann::json& lps, const Usage* usage);
// One stream chunk: text (chat: delta.content; the first chunk also carries
// the role), finish_reason "" for none, usage null for none.
nlohmann::json stream_chunk(const ResponseMeta& meta, const std::string& text, bool first,
                            const std::string& finish_reason, const nlohmann::json& lps, const Usage* usage);
// stream_options.include_usage: the last chunk, no choices.
nlohmann::json usage_chunk(const ResponseMeta& meta, const Usage& usage);

// /v1/embeddings' answer: {"object": "list", "data": [{"object": "embedding",
// "index", "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}};
// vectors [n * dim] row by row; base64: each embedding the base64 text of its
// little-endian float32 bytes (encoding_format "base64"), else numbers.
nlohmann::json embeddings_response(const std::string& model, const std::vector<float>& vectors, int32_t dim,
                                   bool base64, int64_t prompt_tokens);
// Standard base64 (with '=' padding) of bytes.
std::string base64_encode(const uint8_t* data, size_t n);

// JSON text; invalid UTF-8 (a token that is part of a character) becomes U+FFFD.
std::string dump(const nlohmann::json& j);
std::string dump(const nlohmann::ordered_json& j);
// "data: <json>\n\n"
std::string sse_event(const nlohmann::json& j);

}  // namespace fish::serve
