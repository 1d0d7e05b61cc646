// fish serve's HTTP side (cpp-httplib): the OpenAI-compatible routes
// (/v1/chat/completions, /v1/completions, /v1/models), /health, /metrics,
// /tokenize and /detokenize, the API key check, and the streams (server-sent
// events) that feed from the scheduler's jobs. Requests are parsed, rendered
// with the chat template and tokenized on the HTTP threads (a vocab-only
// model under a lock: the scheduler's model is its thread's alone).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fish/fish.h"
#include "fish/fish_chat.h"
#include "serve/scheduler.h"
#include "serve/serve_counters.h"
#include "serve/tool_format.h"

namespace fish::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (port() tells which)
  std::string api_key;          // non-empty: "Authorization: Bearer KEY" required (not for /health)
  std::string model_id;         // what /v1/models lists and answers carry
  fish_sampler_params defaults = fish_sampler_default_params();  // for fields a request leaves out
  bool seed_fixed = false;      // --seed given: requests without a seed use defaults.seed
  bool verbose = false;         // one line per request on stderr
  int threads = 64;             // HTTP worker threads (a stream holds one while it runs)
  // Variables every chat rendering gets unless the request's input has them
  // (a --chat-template file's bos_token / eos_token: a GGUF's come with it).
  std::vector<std::pair<std::string, std::string>> template_vars;
};

class HttpServer {
 public:
  // vocab: a model for tokenizing (vocab-only is enough); tmpl: the chat
  // template, or null (chat requests then get no_template as a 400).
  HttpServer(const HttpOptions& opt, Scheduler* sched, ServeCounters* counters, fish_model* vocab,
             const fish_chat_template* tmpl, std::string no_template);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port; false with *error set when that fails.
  bool bind(std::string* error);
  int port() const { return port_; }
  // The tool-call format the chat template teaches (kNone: replies stay text).
  ToolFamily tool_family() const;
  // Serves until stop() (from another thread).
  void listen();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace fish::serve
