// The OpenAI request bodies fish serve takes, checked field by field: a
// known field of the wrong type or out of range is a 400 naming it (as
// OpenAI's "param"); fields fish does not know are ignored, as clients send
// many. /v1/chat/completions: messages (string content, null, or text parts;
// assistant tool_calls and "tool" messages as tool_request.h says), tools,
// tool_choice and parallel_tool_calls (tool_request.h), stream, stream_options.include_usage,
// max_tokens / max_completion_tokens, temperature, top_p, top_k, min_p, seed,
// stop, logprobs + top_logprobs (0..20), n (1 only), presence_penalty and
// frequency_penalty (-2..2, over the last repeat_last_n tokens as
// fish_sampler_params says), repeat_penalty, repeat_last_n, ignore_eos,
// response_format ("text"; "json_object": one JSON object, then the end;
// "json_schema": one value valid under its schema, then the end, a schema
// fish does not enforce a 400 naming the keyword), logit_bias (token ids to -100..100). /v1/completions: prompt (a string, token ids, or a list of one
// of those), the same sampling fields, logprobs (0..20), echo (false only),
// suffix (empty only), best_of (1 only).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/job.h"
#include "serve/tool_request.h"

namespace fish::serve {

// An error answer: HTTP status and OpenAI's error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

// A 400 naming the request field param (the request parsers' errors).
ApiError bad(const std::string& param, const std::string& message);
// A present, non-null field of a request object, else nullptr.
const nlohmann::ordered_json* field(const nlohmann::ordered_json& o, const char* name);

struct ParsedRequest {
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Chat: the template's input ({"messages", "add_generation_prompt", "tools"}).
  // Ordered: keys keep the client's order, as the template's tojson writes
  // them (Hugging Face's renders a tool as {"type": ..., "function": {"name": ...}}).
  nlohmann::ordered_json template_input;
  // Completions: the prompt as text, or as token ids (prompt_is_tokens).
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;
  GenParams gen;
  ToolRequest tools;  // chat: tools, tool_choice, parallel_tool_calls
};

// Request bodies nest arrays and objects at most kMaxBodyDepth levels deep:
// nlohmann::json copies, dumps and compares a value recursively, one stack
// frame per level, so a 200 KB body of brackets in "tools" overflowed an HTTP
// thread's stack and killed the server. Real bodies (tool schemas included)
// nest a few dozen levels at most; the chat template reads up to
// chat::jinja::kMaxJsonDepth (200) with the conversation around them.
constexpr int kMaxBodyDepth = 128;

// A request body as a JSON object, or the 400 that says why not: not JSON,
// nested deeper than kMaxBodyDepth (found by a scan before parsing), or not
// an object.
std::optional<ApiError> parse_request_body(const std::string& body, nlohmann::json* out);
std::optional<ApiError> parse_request_body(const std::string& body, nlohmann::ordered_json* out);

// defaults: the server's sampling flags (a request without "seed" gets
// defaults.seed when seed_fixed, else a random one).
std::optional<ApiError> parse_chat_request(const nlohmann::ordered_json& body, const fish_sampler_params& defaults,
                                           bool seed_fixed, ParsedRequest* out);
std::optional<ApiError> parse_completion_request(const nlohmann::ordered_json& body, const fish_sampler_params& defaults,
                                                 bool seed_fixed, ParsedRequest* out);

// /v1/embeddings: input (a string, an array of strings, an array of token
// ids, or an array of arrays of token ids; 1..2048 inputs, none empty),
// encoding_format ("float" or "base64": little-endian float32 bytes),
// dimensions (an integer >= 1; the HTTP side refuses any but the model's),
// model (a string, ignored), user (ignored).
struct EmbeddingInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> tokens;
};
struct EmbeddingRequest {
  std::vector<EmbeddingInput> inputs;
  bool base64 = false;
  int64_t dimensions = -1;  // -1: not given
};
constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit per request
std::optional<ApiError> parse_embedding_request(const nlohmann::ordered_json& body, EmbeddingRequest* out);

}  // namespace fish::serve
