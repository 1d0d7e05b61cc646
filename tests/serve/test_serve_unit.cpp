// fish serve's parts alone: stop strings and UTF-8 hold-back, OpenAI request
// parsing (every error names its field), the answer shapes, logprobs and the
// Prometheus text.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "serve/logprobs.h"
#include "serve/metrics.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/text_stream.h"

using namespace fish::serve;
using nlohmann::json;

namespace {

std::string feed(TextStream& s, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += s.push(p);
  return out;
}

ApiError chat_error(const std::string& body) {
  ParsedRequest pr;
  auto e = parse_chat_request(json::parse(body), fish_sampler_default_params(), true, &pr);
  REQUIRE(e.has_value());
  return *e;
}

ApiError completion_error(const std::string& body) {
  ParsedRequest pr;
  auto e = parse_completion_request(json::parse(body), fish_sampler_default_params(), true, &pr);
  REQUIRE(e.has_value());
  return *e;
}

}  // namespace

TEST_CASE("serve: stop strings cut the text, across pieces, and nothing after them goes out", "[serve][unit]") {
  TextStream s({"END", "stop here"});
  CHECK(s.push("Hello E") == "Hello ");  // "E" may begin "END"
  CHECK(s.push("N") == "");
  CHECK(s.push("Dless") == "");           // "END" found: the text before it is all
  CHECK(s.stopped());
  CHECK(s.push("more") == "");
  CHECK(s.flush() == "");

  TextStream t({"stop here"});
  CHECK(feed(t, {"a st", "op", " h", "ere and on"}) == "a ");
  CHECK(t.stopped());

  TextStream u({"xyz"});
  CHECK(feed(u, {"ab", "x", "y"}) == "ab");  // "xy" held back
  CHECK(u.push("!") == "xy!");               // it was not the stop string
  CHECK(u.flush() == "");
  CHECK(feed(u, {"x"}) == "");
  CHECK(u.flush() == "x");  // the end: what was held goes out

  TextStream v({"", "b"});  // an empty stop string is ignored
  CHECK(v.push("aab") == "aa");
  CHECK(v.stopped());
}

TEST_CASE("serve: an incomplete UTF-8 character is held back until it is whole", "[serve][unit]") {
  const std::string euro = "\xE2\x82\xAC", smile = "\xF0\x9F\x98\x80";
  CHECK(incomplete_utf8_tail("abc") == 0);
  CHECK(incomplete_utf8_tail("a\xE2") == 1);
  CHECK(incomplete_utf8_tail("a\xE2\x82") == 2);
  CHECK(incomplete_utf8_tail("a" + euro) == 0);
  CHECK(incomplete_utf8_tail("\xF0\x9F\x98") == 3);
  CHECK(incomplete_utf8_tail(smile) == 0);
  CHECK(incomplete_utf8_tail("\x80\x80\x80\x80") == 0);  // no lead byte: invalid bytes go out
  TextStream s;
  CHECK(s.push("price: \xE2") == "price: ");
  CHECK(s.push("\x82") == "");
  CHECK(s.push("\xAC!") == euro + "!");
  CHECK(s.push("\xF0\x9F") == "");
  CHECK(s.flush() == "\xF0\x9F");  // the end: the bytes as they are
}

TEST_CASE("serve: chat requests parse into the template input and generation parameters", "[serve][unit]") {
  ParsedRequest pr;
  fish_sampler_params d = fish_sampler_default_params();
  d.temp = 0.5f;
  d.seed = 99;
  // Parsed as the server parses it: keys keep the client's order (a template writes them back out).
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(R"({
    "model": "m", "stream": true, "stream_options": {"include_usage": true},
    "messages": [{"role": "system", "content": "S"},
                 {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "name": "u"},
                 {"role": "assistant", "content": null}],
    "max_completion_tokens": 7, "top_p": 0.5, "top_k": 3, "min_p": 0.1, "stop": "x",
    "logprobs": true, "top_logprobs": 2, "presence_penalty": 0.5, "frequency_penalty": -0.25,
    "unknown_field": {"any": 1}})");
  REQUIRE_FALSE(parse_chat_request(body, d, true, &pr).has_value());
  CHECK(pr.stream);
  CHECK(pr.include_usage);
  CHECK(pr.template_input.dump() ==
        R"({"messages":[{"role":"system","content":"S"},)"
        R"({"role":"user","content":"a\nb","name":"u"},{"role":"assistant","content":""}],"add_generation_prompt":true})");
  CHECK(pr.gen.max_tokens == 7);
  CHECK(pr.gen.sampler.temp == 0.5f);  // the server's default
  CHECK(pr.gen.sampler.top_p == 0.5f);
  CHECK(pr.gen.sampler.top_k == 3);
  CHECK(pr.gen.sampler.min_p == Approx(0.1f));
  CHECK(pr.gen.sampler.seed == 99);  // --seed fixed it
  CHECK(pr.gen.sampler.presence_penalty == 0.5f);
  CHECK(pr.gen.sampler.frequency_penalty == -0.25f);
  CHECK(pr.gen.stop == std::vector<std::string>{"x"});
  CHECK(pr.gen.top_logprobs == 2);

  ParsedRequest p2;
  REQUIRE_FALSE(parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "seed": -1})"), d,
                                   false, &p2));
  CHECK(p2.gen.sampler.seed == ~uint64_t(0));
  CHECK(p2.gen.top_logprobs == -1);
  CHECK(p2.gen.max_tokens == -1);
}

TEST_CASE("serve: a bad field is a 400 naming it", "[serve][unit]") {
  CHECK(chat_error(R"([])").message == "the request body must be a JSON object");
  ApiError e = chat_error(R"({})");
  CHECK(e.status == 400);
  CHECK(e.param == "messages");
  CHECK(e.message == "'messages' is required");
  CHECK(chat_error(R"({"messages": []})").message == "'messages' must be a non-empty array");
  CHECK(chat_error(R"({"messages": [{"content": "x"}]})").param == "messages[0].role");
  CHECK(chat_error(R"({"messages": [{"role": "user", "content": 5}]})").param == "messages[0].content");
  e = chat_error(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})");
  CHECK(e.message == "content parts of type 'image_url' are not supported (text only)");
  auto msgs = std::string(R"("messages": [{"role": "user", "content": "x"}])");
  CHECK(chat_error("{" + msgs + R"(, "temperature": "1"})").message == "'temperature' must be a number");
  CHECK(chat_error("{" + msgs + R"(, "temperature": -1})").message == "'temperature' must be between 0 and 100");
  CHECK(chat_error("{" + msgs + R"(, "top_p": 1.5})").message == "'top_p' must be between 0 and 1");
  CHECK(chat_error("{" + msgs + R"(, "top_k": 1.5})").message == "'top_k' must be an integer");
  CHECK(chat_error("{" + msgs + R"(, "max_tokens": -1})").message == "'max_tokens' must be between 0 and 2147483647");
  CHECK(chat_error("{" + msgs + R"(, "max_tokens": 18446744073709551615})").message == "'max_tokens' is too large");
  CHECK(chat_error("{" + msgs + R"(, "stream": "yes"})").message == "'stream' must be a boolean");
  CHECK(chat_error("{" + msgs + R"(, "stop": [""]})").message == "a stop string must not be empty");
  CHECK(chat_error("{" + msgs + R"(, "stop": 3})").param == "stop");
  CHECK(chat_error("{" + msgs + R"(, "n": 2})").message == "only 'n': 1 is supported");
  CHECK(chat_error("{" + msgs + R"(, "top_logprobs": 2})").message == "'top_logprobs' needs 'logprobs': true");
  CHECK(chat_error("{" + msgs + R"(, "top_logprobs": 21, "logprobs": true})").param == "top_logprobs");
  CHECK(chat_error("{" + msgs + R"(, "tools": {}})").param == "tools");
  CHECK(chat_error("{" + msgs + R"(, "model": 1})").param == "model");
  CHECK(chat_error("{" + msgs + R"(, "response_format": {"type": "yaml"}})").message ==
        "'response_format' type 'yaml' is not one of 'text', 'json_object', 'json_schema'");
  // json_schema: a schema fish does not enforce is a 400 naming the keyword and where.
  e = chat_error("{" + msgs +
                 R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,)"
                 R"( "schema": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]+$"}}}}}})");
  CHECK(e.param == "response_format");
  CHECK(e.message ==
        "'response_format.json_schema.schema': keyword 'pattern' at /properties/zip/pattern is not supported");
  CHECK(chat_error("{" + msgs + R"(, "response_format": {"type": "json_schema"}})").message ==
        "'response_format' type 'json_schema' needs a 'json_schema' object");
  CHECK(chat_error("{" + msgs + R"(, "response_format": {"type": "json_schema", "json_schema": {"strict": 1}}})").message ==
        "'response_format.json_schema.strict' must be a boolean");
  CHECK(chat_error("{" + msgs + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": 5}}})").message ==
        "'response_format.json_schema.name' must be a string");
  CHECK(chat_error("{" + msgs + R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": [1]}}})")
            .message == "'response_format.json_schema.schema' must be an object");
  CHECK(chat_error("{" + msgs + R"(, "response_format": {"type": "json_object", "schema": {"$ref": "#"}}})")
            .message.find("'response_format.schema': the schema at the root describes no value") == 0);
  // Taken: the schema as compact text for the scheduler; without one, any JSON value;
  // llama-server's json_object with a "schema".
  for (const auto& [rf, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "json_schema", "json_schema": {"name": "p", "strict": true, "schema": {"type": "object",)"
            R"( "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false}}})",
            R"({"additionalProperties":false,"properties":{"a":{"type":"integer"}},"required":["a"],"type":"object"})"},
           {R"({"type": "json_schema", "json_schema": {"name": "any"}})", "{}"},
           {R"({"type": "json_object", "schema": {"type": "array"}})", R"({"type":"array"})"}}) {
    ParsedRequest pr;
    INFO(rf);
    REQUIRE_FALSE(parse_chat_request(json::parse("{" + msgs + R"(, "response_format": )" + rf + "}"),
                                     fish_sampler_default_params(), true, &pr));
    CHECK(pr.gen.json_schema == want);
    CHECK_FALSE(pr.gen.json_object);
    CHECK(pr.gen.constrained());
  }
  CHECK(chat_error("{" + msgs + R"(, "response_format": "json"})").param == "response_format");
  CHECK(chat_error("{" + msgs + R"(, "logit_bias": [1]})").param == "logit_bias");
  CHECK(chat_error("{" + msgs + R"(, "logit_bias": {"x1": 5}})").message == "'logit_bias' key 'x1' is not a token id");
  CHECK(chat_error("{" + msgs + R"(, "logit_bias": {"-3": 5}})").message == "'logit_bias' key '-3' is not a token id");
  CHECK(chat_error("{" + msgs + R"(, "logit_bias": {"3": 101}})").message ==
        "'logit_bias' values must be numbers between -100 and 100");
  {
    ParsedRequest lb;
    REQUIRE_FALSE(parse_chat_request(json::parse("{" + msgs + R"(, "logit_bias": {"7": -100, "12": 2.5}})"),
                                     fish_sampler_default_params(), true, &lb));
    // nlohmann::json keeps object keys sorted: "12" before "7".
    CHECK(lb.gen.logit_bias == std::vector<std::pair<int32_t, float>>{{12, 2.5f}, {7, -100.0f}});
  }
  for (const char* t : {"text", "json_object"}) {
    ParsedRequest rf;
    REQUIRE_FALSE(parse_chat_request(json::parse("{" + msgs + R"(, "response_format": {"type": ")" + t + R"("}})"),
                                     fish_sampler_default_params(), true, &rf));
    CHECK(rf.gen.json_object == (std::string(t) == "json_object"));
    CHECK(rf.gen.json_schema.empty());
  }
  CHECK(completion_error(R"({})").message == "'prompt' is required");
  CHECK(completion_error(R"({"prompt": ["a", "b"]})").message ==
        "several prompts in one request are not supported: send one request per prompt");
  CHECK(completion_error(R"({"prompt": [1, -2]})").message == "'prompt' token ids must be integers >= 0");
  CHECK(completion_error(R"({"prompt": "x", "echo": true})").param == "echo");
  CHECK(completion_error(R"({"prompt": "x", "suffix": "y"})").param == "suffix");
  CHECK(completion_error(R"({"prompt": "x", "best_of": 2})").param == "best_of");
  CHECK(completion_error(R"({"prompt": "x", "logprobs": true})").message == "'logprobs' must be an integer");
  ParsedRequest pr;
  REQUIRE_FALSE(parse_completion_request(json::parse(R"({"prompt": [[5, 6]], "logprobs": 0, "echo": false, "suffix": null})"),
                                         fish_sampler_default_params(), true, &pr));
  CHECK(pr.prompt_is_tokens);
  CHECK(pr.prompt_tokens == std::vector<int32_t>{5, 6});
  CHECK(pr.gen.top_logprobs == 0);
}

// A body of deeply nested brackets (here in "tools", which goes to the
// template as it is) is refused before parsing: copying or dumping it
// recursed once per level and overflowed the HTTP thread's stack (fish
// serve died on a 200 KB body of 100,000 levels). Brackets inside strings,
// escaped quotes included, do not count.
TEST_CASE("serve: request bodies: not JSON, not an object, or nested too deep is a 400", "[serve][unit]") {
  json j;
  auto nested = [](int n) {
    return R"({"messages": [{"role": "user", "content": "x"}], "tools": )" + std::string(size_t(n), '[') +
           std::string(size_t(n), ']') + "}";
  };
  // "tools" sits at level 1, its brackets below it.
  CHECK_FALSE(parse_request_body(nested(kMaxBodyDepth - 1), &j));
  CHECK(j["tools"].is_array());
  std::optional<ApiError> e = parse_request_body(nested(kMaxBodyDepth), &j);
  REQUIRE(e);
  CHECK(e->status == 400);
  CHECK(e->param.empty());
  CHECK(e->message == "the request body nests arrays and objects more than 128 levels deep");
  e = parse_request_body(nested(100000), &j);
  REQUIRE(e);
  CHECK(e->message == "the request body nests arrays and objects more than 128 levels deep");
  // Brackets in strings (with escaped quotes and backslashes around them) are text.
  const std::string brackets(1000, '[');
  REQUIRE_FALSE(parse_request_body(R"({"prompt": "\"\\)" + brackets + R"(\\\"{"})", &j));
  CHECK(j["prompt"].get<std::string>() == R"("\)" + brackets + R"(\"{)");
  e = parse_request_body(R"({"messages": [)", &j);
  REQUIRE(e);
  CHECK(e->message.rfind("the request body is not valid JSON: ", 0) == 0);
  // A number past double's range is out_of_range to nlohmann::json, not a parse_error (it
  // escaped as a 500; found by fuzz_request), and its message quotes the number: cut.
  e = parse_request_body(R"({"max_tokens": 444E)" + std::string(1000, '9') + "}", &j);
  REQUIRE(e);
  CHECK(e->message.rfind("the request body is not valid JSON: number overflow parsing '444E999", 0) == 0);
  CHECK(e->message.size() < 300);
  e = parse_request_body("[1, 2]", &j);
  REQUIRE(e);
  CHECK(e->message == "the request body must be a JSON object");
}

TEST_CASE("serve: answers in OpenAI's shapes", "[serve][unit]") {
  ResponseMeta chat{true, "chatcmpl-1", "m.gguf", 1700000000};
  Usage u{10, 3, 4};
  json r = full_response(chat, "Hi!", "stop", u, nullptr);
  CHECK(r["object"] == "chat.completion");
  CHECK(r["choices"][0]["message"] == json{{"role", "assistant"}, {"content", "Hi!"}});
  CHECK(r["choices"][0]["finish_reason"] == "stop");
  CHECK(r["choices"][0]["logprobs"].is_null());
  CHECK(r["usage"] == json::parse(R"({"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
                                      "prompt_tokens_details": {"cached_tokens": 4}})"));
  json c = stream_chunk(chat, "", true, "", nullptr, nullptr);
  CHECK(c["object"] == "chat.completion.chunk");
  CHECK(c["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
  CHECK(c["choices"][0]["finish_reason"].is_null());
  CHECK(c.find("usage") == c.end());
  c = stream_chunk(chat, "", false, "length", nullptr, &u);
  CHECK(c["choices"][0]["delta"] == json::object());
  CHECK(c["usage"]["total_tokens"] == 13);
  CHECK(usage_chunk(chat, u)["choices"] == json::array());
  ResponseMeta cmpl{false, "cmpl-1", "m.gguf", 1};
  CHECK(full_response(cmpl, "text", "length", u, nullptr)["choices"][0]["text"] == "text");
  CHECK(stream_chunk(cmpl, "t", false, "", nullptr, nullptr)["object"] == "text_completion");
  const ApiError e{400, "bad", "invalid_request_error", "x", ""};
  CHECK(error_body(e).dump() == R"({"error":{"code":null,"message":"bad","param":"x","type":"invalid_request_error"}})");
  CHECK(sse_event(json{{"a", 1}}) == "data: {\"a\":1}\n\n");
  CHECK(dump(json("\xE2\x82")) == "\"\xEF\xBF\xBD\"");  // a part of a character: U+FFFD
}

TEST_CASE("serve: logprobs are the log-softmax of the logits, the likeliest first", "[serve][unit]") {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  auto piece = [](int32_t id) {
    std::string s(1, 't');  // (not "t" + ...: GCC 12's -Wrestrict false positive)
    s += std::to_string(id);
    return s;
  };
  const TokenLogprob t = token_logprob(logits.data(), 4, 2, 3, piece);
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  CHECK(t.id == 2);
  CHECK(t.piece == "t2");
  CHECK(t.logprob == Approx(2.0 - lse).epsilon(1e-6));
  REQUIRE(t.top.size() == 3);
  CHECK(t.top[0].first == "t1");  // a tie goes to the lower id
  CHECK(t.top[1].first == "t3");
  CHECK(t.top[2].first == "t2");
  CHECK(t.top[0].second == Approx(3.0 - lse).epsilon(1e-6));
  size_t offset = 5;
  const json cj = logprobs_json(false, {t, t}, true, &offset);
  CHECK(cj["text_offset"] == json::array({5, 7}));
  CHECK(offset == 9);
  CHECK(cj["top_logprobs"][0].size() == 3);
  CHECK(logprobs_json(false, {t}, false, &offset)["top_logprobs"].is_null());
  const json ch = logprobs_json(true, {t}, true, &offset);
  CHECK(ch["content"][0]["bytes"] == json::array({116, 50}));
  CHECK(ch["content"][0]["top_logprobs"].size() == 3);
}

TEST_CASE("serve: /metrics is Prometheus text", "[serve][unit]") {
  ServeCounters c;
  c.count_request("/v1/completions", 200);
  c.count_request("/v1/completions", 200);
  c.count_request("/health", 503);
  c.generated_tokens = 50;
  c.gen_us = 2000000;
  c.running = 2;
  const std::string t = prometheus_text(c, 4);
  CHECK(t.find("# TYPE fish_http_requests_total counter\n") != std::string::npos);
  CHECK(t.find("fish_http_requests_total{path=\"/v1/completions\",code=\"200\"} 2\n") != std::string::npos);
  CHECK(t.find("fish_http_requests_total{path=\"/health\",code=\"503\"} 1\n") != std::string::npos);
  CHECK(t.find("# TYPE fish_requests_running gauge\nfish_requests_running 2\n") != std::string::npos);
  CHECK(t.find("fish_generation_tokens_per_second 25\n") != std::string::npos);
  CHECK(t.find("fish_slots 4\n") != std::string::npos);
  CHECK(t.find("fish_prompt_tokens_per_second 0\n") != std::string::npos);
}

TEST_CASE("serve: embedding requests parse, their refusals name the field, base64 is float32 little-endian",
          "[serve][unit]") {
  auto parse = [](const char* text, EmbeddingRequest* out) {
    return parse_embedding_request(nlohmann::ordered_json::parse(text), out);
  };
  EmbeddingRequest r;
  REQUIRE_FALSE(parse(R"({"input": "a cat", "encoding_format": "base64", "dimensions": 64})", &r));
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0].text == "a cat");
  CHECK(r.base64);
  CHECK(r.dimensions == 64);
  r = {};
  REQUIRE_FALSE(parse(R"({"input": [[1, 2], [3]]})", &r));
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[1].is_tokens);
  CHECK(r.inputs[0].tokens == std::vector<int32_t>{1, 2});
  CHECK(r.dimensions == -1);
  r = {};
  REQUIRE_FALSE(parse(R"({"input": [5, 6, 7]})", &r));
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0].tokens.size() == 3);
  for (const char* bad : {R"({})", R"({"input": []})", R"({"input": ""})", R"({"input": ["a", 1]})",
                          R"({"input": [[1], "a"]})", R"({"input": {"a": 1}})", R"({"input": [[]]})",
                          R"({"input": [1.5]})"}) {
    EmbeddingRequest x;
    auto e = parse(bad, &x);
    INFO(bad);
    REQUIRE(e);
    CHECK(e->param == "input");
  }
  for (auto [bad, param] : {std::pair{R"({"input": "a", "encoding_format": "hex"})", "encoding_format"},
                            {R"({"input": "a", "dimensions": 0})", "dimensions"},
                            {R"({"input": "a", "model": 1})", "model"}}) {
    EmbeddingRequest x;
    auto e = parse(bad, &x);
    INFO(bad);
    REQUIRE(e);
    CHECK(e->param == param);
  }
  CHECK(base64_encode(reinterpret_cast<const uint8_t*>("fooba"), 5) == "Zm9vYmE=");
  CHECK(base64_encode(reinterpret_cast<const uint8_t*>("foob"), 4) == "Zm9vYg==");
  // 1.0f is 00 00 80 3f little-endian.
  const json j = embeddings_response("m", {1.0f, -2.0f}, 2, true, 3);
  CHECK(j["data"][0]["embedding"] == "AACAPwAAAMA=");
  CHECK(j["usage"]["prompt_tokens"] == 3);
  CHECK(j["usage"]["total_tokens"] == 3);
  CHECK(j["object"] == "list");
}
