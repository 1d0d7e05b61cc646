// fish serve's routes: see http_server.h.
#include "serve/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "serve/metrics.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/tool_call_parser.h"
#include "serve/tool_request.h"

namespace fish::serve {

using nlohmann::json;

namespace {

// The label /metrics counts a request under (aliases to their /v1 names).
std::string path_label(const std::string& path) {
  static const char* known[] = {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models", "/health",
                                "/metrics", "/tokenize", "/detokenize"};
  for (const char* k : known)
    if (path == k || "/v1" + path == k) return k;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models";
  return "other";
}

bool same_secret(const std::string& a, const std::string& b) {
  // Compares every byte whatever differs first (no early exit to time).
  unsigned diff = unsigned(a.size() != b.size());
  for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(uint8_t(a[i]) ^ uint8_t(i < b.size() ? b[i] : 0));
  return diff == 0;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_body(e)); }

ApiError error(int status, const std::string& message, const std::string& type = "invalid_request_error",
               const std::string& param = "", const std::string& code = "") {
  ApiError e;
  e.status = status;
  e.message = message;
  e.type = type;
  e.param = param;
  e.code = code;
  return e;
}

}  // namespace

struct HttpServer::Impl {
  HttpOptions opt;
  Scheduler* sched;
  ServeCounters* counters;
  fish_model* vocab;
  const fish_chat_template* tmpl;
  std::string no_template;
  ToolFamily family = ToolFamily::kNone;  // the template's tool-call format
  std::vector<int32_t> marker_tokens;     // its markers that are control tokens (kept in the text)
  int32_t n_vocab = 0, n_ctx = 0, bos = -1;
  int64_t started = std::time(nullptr);
  std::atomic<uint64_t> next_id{1};
  std::mutex tok_mu;  // the vocab model and the template: one HTTP thread at a time
  httplib::Server svr;

  // Text to token ids (BOS as the model adds it, once).
  std::optional<ApiError> tokenize(const std::string& text, bool add_special, bool parse_special,
                                   std::vector<int32_t>* ids) {
    std::lock_guard<std::mutex> lk(tok_mu);
    ids->assign(text.size() + 16, 0);
    int32_t n = fish_tokenize(vocab, text.data(), text.size(), add_special, parse_special, ids->data(),
                              int32_t(ids->size()));
    if (n < 0 && n != -INT32_MAX) {
      ids->assign(size_t(-n), 0);
      n = fish_tokenize(vocab, text.data(), text.size(), add_special, parse_special, ids->data(), int32_t(ids->size()));
    }
    if (n < 0) return error(400, std::string("the text could not be tokenized: ") + fish_last_error(vocab));
    ids->resize(size_t(n));
    if (ids->size() >= 2 && bos >= 0 && (*ids)[0] == bos && (*ids)[1] == bos) ids->erase(ids->begin());
    return std::nullopt;
  }

  std::optional<ApiError> render_chat(const nlohmann::ordered_json& input, std::string* text) {
    if (!tmpl) return error(400, no_template, "invalid_request_error", "messages");
    const std::string in = dump(input);
    char* out = nullptr;
    size_t n = 0;
    fish_error* err = nullptr;
    int st;
    {
      std::lock_guard<std::mutex> lk(tok_mu);
      st = fish_chat_template_render_json(tmpl, in.data(), in.size(), &out, &n, &err);
    }
    if (st != FISH_CHAT_OK) {
      ApiError e = error(400, st == FISH_CHAT_RAISED ? fish_error_message(err)
                                                     : std::string("the chat template failed: ") + fish_error_message(err),
                         "invalid_request_error", "messages");
      fish_error_free(err);
      return e;
    }
    text->assign(out, n);
    fish_free(out);
    return std::nullopt;
  }

  std::optional<ApiError> check_ids(const std::vector<int32_t>& ids, const char* param) const {
    for (int32_t t : ids)
      if (t < 0 || t >= n_vocab)
        return error(400, "token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                              std::to_string(n_vocab - 1) + ")", "invalid_request_error", param);
    return std::nullopt;
  }

  void generation(const httplib::Request& req, httplib::Response& res, bool chat);
  void embeddings(const httplib::Request& req, httplib::Response& res);
  // Tool calls of a chat request: the template input adapted, and when the
  // choice forces a call the prompt's suffix and the schema (in pr.gen).
  std::optional<ApiError> prepare_tools(ParsedRequest& pr, std::string* prompt_suffix);
  void stream(httplib::Response& res, const std::shared_ptr<Job>& job, const ResponseMeta& meta, bool include_usage,
              std::shared_ptr<ToolCallParser> tools);
  void routes();
};

std::optional<ApiError> HttpServer::Impl::prepare_tools(ParsedRequest& pr, std::string* prompt_suffix) {
  adapt_tool_messages(family, pr.template_input["messages"]);
  for (const auto& [k, v] : opt.template_vars)
    if (!pr.template_input.contains(k)) pr.template_input[k] = v;
  const ToolRequest& tr = pr.tools;
  if (tr.parse() && family != ToolFamily::kNone) pr.gen.keep_special = marker_tokens;
  if (!tr.forced()) return std::nullopt;
  if (family == ToolFamily::kNone)
    return error(400, "'tool_choice' forces a tool call, but this model's chat template has no tool-call format fish "
                      "knows (Qwen2.5 / Qwen3 / QwQ, Llama 3.1 / 3.2, Mistral Nemo, Granite 3.3)",
                 "invalid_request_error", "tool_choice");
  if (pr.gen.constrained())
    return error(400, "'tool_choice' forcing a tool call cannot be combined with 'response_format' JSON",
                 "invalid_request_error", "tool_choice");
  if (auto e = forced_schema_for(family, tr, &pr.gen.json_schema)) return e;
  *prompt_suffix = tool_call_forced_prefix(family);
  return std::nullopt;
}

void HttpServer::Impl::generation(const httplib::Request& req, httplib::Response& res, bool chat) {
  nlohmann::ordered_json body;
  if (auto e = parse_request_body(req.body, &body)) return send_error(res, *e);
  ParsedRequest pr;
  if (auto e = chat ? parse_chat_request(body, opt.defaults, opt.seed_fixed, &pr)
                    : parse_completion_request(body, opt.defaults, opt.seed_fixed, &pr))
    return send_error(res, *e);
  std::vector<int32_t> prompt;
  if (chat) {
    std::string text, suffix;
    if (auto e = prepare_tools(pr, &suffix)) return send_error(res, *e);
    if (auto e = render_chat(pr.template_input, &text)) return send_error(res, *e);
    if (auto e = tokenize(text + suffix, true, true, &prompt)) return send_error(res, *e);
  } else if (pr.prompt_is_tokens) {
    prompt = pr.prompt_tokens;
    if (auto e = check_ids(prompt, "prompt")) return send_error(res, *e);
  } else if (auto e = tokenize(pr.prompt_text, true, true, &prompt)) {
    return send_error(res, *e);
  }
  for (const auto& [id, bias] : pr.gen.logit_bias)
    if (id >= n_vocab)
      return send_error(res, error(400, "'logit_bias' token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                            std::to_string(n_vocab - 1) + ")", "invalid_request_error", "logit_bias"));
  const char* param = chat ? "messages" : "prompt";
  if (prompt.empty()) return send_error(res, error(400, "the prompt is empty", "invalid_request_error", param));
  if (int32_t(prompt.size()) >= n_ctx)
    return send_error(res, error(400,
                                 "This model's maximum context length is " + std::to_string(n_ctx) +
                                     " tokens. However, your prompt is " + std::to_string(prompt.size()) +
                                     " tokens (one more at least is needed to generate).",
                                 "invalid_request_error", param, "context_length_exceeded"));
  auto job = std::make_shared<Job>(std::move(prompt), pr.gen);
  switch (sched->submit(job)) {
    case Scheduler::Submit::kOk:
      break;
    case Scheduler::Submit::kQueueFull:
      res.set_header("Retry-After", "1");
      return send_error(res, error(503, "the server is busy: every sequence is taken and the queue is full; retry later",
                                   "server_error", "", "overloaded"));
    case Scheduler::Submit::kDraining:
      return send_error(res, error(503, "the server is shutting down", "server_error", "", "shutting_down"));
  }
  char id[48];
  std::snprintf(id, sizeof id, "%s-%012llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)next_id++);
  ResponseMeta meta{chat, id, opt.model_id, int64_t(std::time(nullptr))};
  std::shared_ptr<ToolCallParser> tools;
  if (chat && pr.tools.parse() && family != ToolFamily::kNone)
    tools = std::make_shared<ToolCallParser>(family, pr.tools.max_calls(), pr.tools.forced(), pr.tools.names());
  if (pr.stream) return stream(res, job, meta, pr.include_usage, tools);

  std::string text;
  std::vector<TokenLogprob> lps;
  std::vector<Delta> ds;
  for (bool done = false; !done;) {
    ds.clear();
    done = job->wait(std::chrono::milliseconds(1000), &ds);
    for (Delta& d : ds) {
      text += d.text;
      for (TokenLogprob& t : d.logprobs) lps.push_back(std::move(t));
    }
  }
  if (!job->error().empty())
    return send_error(res, error(sched->draining() ? 503 : 500, job->error(), "server_error"));
  size_t offset = 0;
  json lj;
  if (pr.gen.top_logprobs >= 0) lj = logprobs_json(chat, lps, pr.gen.top_logprobs > 0, &offset);
  std::vector<ToolCall> calls;
  std::string finish = job->finish_reason();
  if (tools) {
    std::vector<ToolEvent> evs = tools->push(text);
    for (ToolEvent& e : tools->finish()) evs.push_back(std::move(e));
    text.clear();
    for (ToolEvent& e : evs) {
      if (e.is_call) calls.push_back(std::move(e.call));
      else text += e.content;
    }
    if (!calls.empty()) finish = "tool_calls";
  }
  send_json(res, 200, full_response(meta, text, finish, job->usage(), pr.gen.top_logprobs >= 0 ? &lj : nullptr, calls));
}

void HttpServer::Impl::embeddings(const httplib::Request& req, httplib::Response& res) {
  if (!sched->embeddings())
    return send_error(res, error(404, "embeddings are off on this server: start fish serve with --embeddings",
                                 "invalid_request_error", "", "embeddings_disabled"));
  nlohmann::ordered_json body;
  if (auto e = parse_request_body(req.body, &body)) return send_error(res, *e);
  EmbeddingRequest er;
  if (auto e = parse_embedding_request(body, &er)) return send_error(res, *e);
  const int32_t dim = sched->n_embd();
  if (er.dimensions >= 0 && er.dimensions != dim)
    return send_error(res, error(400, "'dimensions' " + std::to_string(er.dimensions) + " is not supported: this model's embeddings have " +
                                          std::to_string(dim) + " dimensions (leave it out, or send " + std::to_string(dim) + ")",
                                 "invalid_request_error", "dimensions"));
  std::vector<std::vector<int32_t>> inputs;
  int64_t n_tokens = 0;
  for (size_t i = 0; i < er.inputs.size(); ++i) {
    EmbeddingInput& in = er.inputs[i];
    std::vector<int32_t> ids;
    if (in.is_tokens) {
      ids = std::move(in.tokens);
      if (auto e = check_ids(ids, "input")) return send_error(res, *e);
    } else if (auto e = tokenize(in.text, true, false, &ids)) {
      e->param = "input";
      return send_error(res, *e);
    }
    if (ids.empty()) return send_error(res, error(400, "input " + std::to_string(i) + " has no tokens", "invalid_request_error", "input"));
    if (int32_t(ids.size()) > n_ctx)
      return send_error(res, error(400, "This model's maximum context length is " + std::to_string(n_ctx) + " tokens, but input " +
                                            std::to_string(i) + " has " + std::to_string(ids.size()) + " tokens.",
                                   "invalid_request_error", "input", "context_length_exceeded"));
    n_tokens += int64_t(ids.size());
    inputs.push_back(std::move(ids));
  }
  auto job = std::make_shared<EmbedJob>(std::move(inputs), fish_embed_default_params());
  switch (sched->submit_embed(job)) {
    case Scheduler::Submit::kOk:
      break;
    case Scheduler::Submit::kQueueFull:
      res.set_header("Retry-After", "1");
      return send_error(res, error(503, "the server is busy: the embeddings queue is full; retry later", "server_error", "",
                                   "overloaded"));
    case Scheduler::Submit::kDraining:
      return send_error(res, error(503, "the server is shutting down", "server_error", "", "shutting_down"));
  }
  job->wait();
  if (!job->error().empty()) return send_error(res, error(sched->draining() ? 503 : 500, job->error(), "server_error"));
  send_json(res, 200, embeddings_response(opt.model_id, job->vectors(), dim, er.base64, n_tokens));
}

void HttpServer::Impl::stream(httplib::Response& res, const std::shared_ptr<Job>& job, const ResponseMeta& meta,
                              bool include_usage, std::shared_ptr<ToolCallParser> tools) {
  struct State {
    bool first = true;
    size_t offset = 0;  // completion text so far (completions' text_offset)
    size_t n_calls = 0; // tool calls sent
  };
  auto st = std::make_shared<State>();
  const bool want_lp = job->params.top_logprobs >= 0, with_top = job->params.top_logprobs > 0;
  Scheduler* s = sched;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, meta, include_usage, st, want_lp, with_top, s, tools](size_t, httplib::DataSink& sink) {
        std::vector<Delta> ds;
        const bool done = job->wait(std::chrono::milliseconds(200), &ds);
        std::string text;
        std::vector<TokenLogprob> lps;
        for (Delta& d : ds) {
          text += d.text;
          for (TokenLogprob& t : d.logprobs) lps.push_back(std::move(t));
        }
        // The text as content pieces and whole tool calls (tools: a chat
        // request whose replies are parsed; it holds back what may start a call).
        std::vector<ToolEvent> evs;
        if (tools) {
          evs = tools->push(text);
          if (done && job->error().empty())
            for (ToolEvent& e : tools->finish()) evs.push_back(std::move(e));
        } else if (!text.empty()) {
          evs.push_back(ToolEvent{false, std::move(text), {}});
        }
        // This poll's logprobs ride on its first chunk.
        bool lp_sent = false;
        auto lp_json = [&] {
          if (!want_lp) return json(nullptr);
          json lj = logprobs_json(meta.chat, lp_sent ? std::vector<TokenLogprob>{} : lps, with_top, &st->offset);
          lp_sent = true;
          return lj;
        };
        std::string out;
        for (const ToolEvent& e : evs) {
          if (!e.is_call) {
            out += sse_event(stream_chunk(meta, e.content, st->first, "", lp_json(), nullptr));
            st->first = false;
            continue;
          }
          if (st->first) out += sse_event(stream_chunk(meta, "", true, "", lp_json(), nullptr));
          st->first = false;
          out += sse_event(delta_chunk(meta, tool_call_head_delta(st->n_calls, e.call), "", lp_json(), nullptr));
          out += sse_event(delta_chunk(meta, tool_call_args_delta(st->n_calls, e.call), "", lp_json(), nullptr));
          ++st->n_calls;
        }
        if (out.empty() && (!lps.empty() || (st->first && meta.chat))) {
          out += sse_event(stream_chunk(meta, "", st->first, "", lp_json(), nullptr));
          st->first = false;
        }
        if (done) {
          if (!job->error().empty()) {
            out += sse_event(error_body(error(500, job->error(), "server_error")));
          } else {
            const std::string finish = st->n_calls > 0 ? "tool_calls" : job->finish_reason();
            out += sse_event(stream_chunk(meta, "", st->first, finish, want_lp ? logprobs_json(meta.chat, {}, with_top, &st->offset) : json(nullptr), &job->usage()));
            if (include_usage) out += sse_event(usage_chunk(meta, job->usage()));
          }
          out += "data: [DONE]\n\n";
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          s->cancel(job);  // the client went away: its sequence is freed at the next step
          return false;
        }
        if (done) sink.done();
        return true;
      },
      [job, s](bool success) {
        if (!success) s->cancel(job);
      });
}

void HttpServer::Impl::routes() {
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_secret(auth.substr(prefix.size()), opt.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, error(401, auth.empty() ? "no API key: send it as 'Authorization: Bearer KEY'" : "invalid API key",
                          "invalid_request_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Every answer of 400 and up without a body gets an OpenAI-style one (404, 413, ...).
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg = "HTTP " + std::to_string(res.status);
    if (res.status == 404) msg = "unknown request URL: " + req.method + " " + req.path;
    if (res.status == 405) msg = "method " + req.method + " not allowed on " + req.path;
    if (res.status == 413) msg = "the request body is too large";
    send_error(res, error(res.status, msg));
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, error(500, "internal error: " + what, "server_error"));
  });
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    counters->count_request(path_label(req.path), res.status);
    if (opt.verbose) std::fprintf(stderr, "fish serve: %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });

  auto chat = [this](const httplib::Request& req, httplib::Response& res) { generation(req, res, true); };
  auto completions = [this](const httplib::Request& req, httplib::Response& res) { generation(req, res, false); };
  for (const char* p : {"/v1/chat/completions", "/chat/completions"}) svr.Post(p, chat);
  for (const char* p : {"/v1/completions", "/completions"}) svr.Post(p, completions);
  auto embed = [this](const httplib::Request& req, httplib::Response& res) { embeddings(req, res); };
  for (const char* p : {"/v1/embeddings", "/embeddings"}) svr.Post(p, embed);

  auto model_json = [this] {
    return json{{"id", opt.model_id}, {"object", "model"}, {"created", started}, {"owned_by", "fish"},
                {"meta", {{"n_ctx", n_ctx}, {"n_vocab", n_vocab}, {"n_seq", sched->n_slots()}}}};
  };
  auto models = [model_json](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, json{{"object", "list"}, {"data", json::array({model_json()})}});
  };
  for (const char* p : {"/v1/models", "/models"}) svr.Get(p, models);
  svr.Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] == opt.model_id) return send_json(res, 200, model_json());
    send_error(res, error(404, "the model '" + std::string(req.matches[1]) + "' does not exist (this server has '" +
                                   opt.model_id + "')", "invalid_request_error", "model", "model_not_found"));
  });

  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (sched->draining()) return send_json(res, 503, json{{"status", "shutting down"}});
    send_json(res, 200, json{{"status", "ok"}});
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(*counters, sched->n_slots()), "text/plain; version=0.0.4");
  });

  svr.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto e = parse_request_body(req.body, &body)) return send_error(res, *e);
    const auto c = body.find("content");
    if (c == body.end() || !c->is_string())
      return send_error(res, error(400, "'content' must be a string", "invalid_request_error", "content"));
    bool add_special = true, parse_special = true, with_pieces = false;
    for (auto [name, dst] : {std::pair{"add_special", &add_special}, {"parse_special", &parse_special},
                             {"with_pieces", &with_pieces}}) {
      const auto it = body.find(name);
      if (it == body.end() || it->is_null()) continue;
      if (!it->is_boolean())
        return send_error(res, error(400, std::string("'") + name + "' must be a boolean", "invalid_request_error", name));
      *dst = it->get<bool>();
    }
    std::vector<int32_t> ids;
    if (auto e = tokenize(c->get<std::string>(), add_special, parse_special, &ids)) return send_error(res, *e);
    json toks = json::array();
    for (int32_t t : ids) {
      if (!with_pieces) {
        toks.push_back(t);
        continue;
      }
      char buf[256];
      std::lock_guard<std::mutex> lk(tok_mu);
      int32_t n = fish_token_to_piece(vocab, t, buf, sizeof buf, 1);
      toks.push_back(json{{"id", t}, {"piece", std::string(buf, size_t(n > 0 ? n : 0))}});
    }
    send_json(res, 200, json{{"tokens", toks}});
  });
  svr.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (auto e = parse_request_body(req.body, &body)) return send_error(res, *e);
    const auto t = body.find("tokens");
    if (t == body.end() || !t->is_array())
      return send_error(res, error(400, "'tokens' must be an array of token ids", "invalid_request_error", "tokens"));
    std::vector<int32_t> ids;
    for (const json& x : *t) {
      if (!x.is_number_integer() || x.get<int64_t>() < INT32_MIN || x.get<int64_t>() > INT32_MAX)
        return send_error(res, error(400, "'tokens' must be an array of token ids", "invalid_request_error", "tokens"));
      ids.push_back(int32_t(x.get<int64_t>()));
    }
    if (auto e = check_ids(ids, "tokens")) return send_error(res, *e);
    std::string text;
    {
      std::lock_guard<std::mutex> lk(tok_mu);
      int32_t n = fish_detokenize(vocab, ids.data(), int32_t(ids.size()), nullptr, 0, 0);
      if (n < 0) {
        text.resize(size_t(-n));
        n = fish_detokenize(vocab, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()), 0);
      }
      text.resize(size_t(n > 0 ? n : 0));
    }
    send_json(res, 200, json{{"content", text}});
  });
}

HttpServer::HttpServer(const HttpOptions& opt, Scheduler* sched, ServeCounters* counters, fish_model* vocab,
                       const fish_chat_template* tmpl, std::string no_template)
    : impl_(std::make_unique<Impl>()) {
  Impl& i = *impl_;
  i.opt = opt;
  i.sched = sched;
  i.counters = counters;
  i.vocab = vocab;
  i.tmpl = tmpl;
  i.no_template = std::move(no_template);
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(vocab, &info);
  i.n_vocab = info.n_vocab;
  i.bos = info.bos;
  i.n_ctx = sched->n_ctx();
  // The tool-call format, and which of its markers the vocabulary holds as
  // control tokens (their text would be dropped from replies otherwise).
  if (tmpl && !fish_chat_template_is_fallback(tmpl)) i.family = detect_tool_family(fish_chat_template_source(tmpl));
  for (const std::string& m : tool_call_marker_texts(i.family)) {
    std::vector<int32_t> ids;
    char buf[8];
    if (!i.tokenize(m, false, true, &ids) && ids.size() == 1 && fish_token_to_piece(vocab, ids[0], buf, sizeof buf, 0) == 0)
      i.marker_tokens.push_back(ids[0]);
  }
  const int threads = opt.threads;
  i.svr.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  i.svr.set_payload_max_length(size_t(16) << 20);
  i.svr.set_keep_alive_max_count(1000);
  i.routes();
}

HttpServer::~HttpServer() = default;

bool HttpServer::bind(std::string* error) {
  Impl& i = *impl_;
  // Our own socket options: SO_REUSEADDR only (httplib's default adds
  // SO_REUSEPORT, which would let a second server share the port silently),
  // TCP_NODELAY (accepted sockets inherit it: a stream's small chunks go out
  // at once instead of waiting for the client's delayed ACK), and the socket
  // kept to raise its backlog below.
  int fd = -1;
  i.svr.set_tcp_nodelay(true);
  i.svr.set_socket_options([&fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    fd = sock;
  });
  bool ok = false;
  if (i.opt.port == 0) {
    port_ = i.svr.bind_to_any_port(i.opt.host);
    ok = port_ > 0;
  } else if (i.svr.bind_to_port(i.opt.host, i.opt.port)) {
    port_ = i.opt.port;
    ok = true;
  }
  // This cpp-httplib listens with a backlog of 5: many clients connecting at
  // once would have their SYNs dropped and retried a second later.
  if (ok && fd >= 0) ::listen(fd, SOMAXCONN);
  if (ok) return true;
  *error = "cannot listen on " + i.opt.host + ":" + std::to_string(i.opt.port) + " (in use, or not an address of this machine)";
  return false;
}

ToolFamily HttpServer::tool_family() const { return impl_->family; }

void HttpServer::listen() { impl_->svr.listen_after_bind(); }

void HttpServer::stop() { impl_->svr.stop(); }

}  // namespace fish::serve
