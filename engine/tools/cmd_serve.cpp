// fish serve: an OpenAI-compatible HTTP server (serve/http_server.h) over one
// model whose sequences a scheduler thread batches (serve/scheduler.h).
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>

#include "cli_model.h"
#include "command.h"
#include "fish/fish_chat.h"
#include "sampling_flags.h"
#include "serve/http_server.h"
#include "serve/scheduler.h"

using namespace fish::cli;
using namespace fish::serve;

namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// SIGTERM / SIGINT, taken by one thread (sigwait): the first stops taking
// requests and lets those accepted finish, then stops the server; a second
// ends the running ones at once.
void watch_signals(const sigset_t& set, Scheduler& sched, HttpServer& http, std::atomic<bool>& stopped) {
  bool draining = false;
  const timespec tick{0, 50 * 1000 * 1000};
  for (;;) {
    const int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      if (!draining) {
        draining = true;
        sched.drain();
        std::fprintf(stderr, "fish serve: %s: finishing the requests accepted, then stopping (again: at once)\n",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT");
      } else {
        sched.abort_all("the server is stopping");
        std::fprintf(stderr, "fish serve: stopping now\n");
      }
    } else if (sig == SIGUSR1) {
      return;  // the server stopped by itself
    }
    if (draining && sched.idle()) {
      stopped = true;
      http.stop();
      return;
    }
  }
}

}  // namespace

static int cmd_serve(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf(
        "usage: fish serve -m MODEL [--host 127.0.0.1] [--port 8080] [-np N] [--api-key KEY] [-c CTX]\n"
        "                  [--queue N] [-b N] [--alias NAME] [--fallback] [--chat-template FILE]\n"
        "                  [--http-threads N] [--embeddings] [--embeddings-seqs N] [--verbose]\n"
        "                  [sampling defaults] [-t N] [-ngl N] [--requant MODE]\n"
        "  An OpenAI-compatible server: POST /v1/chat/completions and /v1/completions (\"stream\": true\n"
        "  for server-sent events), GET /v1/models, /health, /metrics (Prometheus), POST /tokenize\n"
        "  {\"content\": TEXT} and /detokenize {\"tokens\": [...]}. Requests run as sequences of one\n"
        "  model, batched together (continuous batching), a prompt starting from the longest prefix\n"
        "  the KV cache still holds. Chat requests take OpenAI's tools and tool_choice; replies of models\n"
        "  whose template teaches Qwen2.5/Qwen3/QwQ, Llama 3.1/3.2, Mistral Nemo or Granite 3.3 tool calls\n"
        "  come back as message.tool_calls.\n"
        "  --host H, --port P     where to listen (127.0.0.1:8080; --port 0 picks a free port)\n"
        "  -np, --parallel N      sequences generated together (4)\n"
        "  -c CTX                 positions per sequence (the model's context)\n"
        "  --api-key KEY          requests need 'Authorization: Bearer KEY' (401 without; /health is open)\n"
        "  --queue N              requests waiting for a sequence at most (64); more get 503 + Retry-After\n"
        "  -b, --batch-size N     rows of one evaluation step (512): decode rows + prompt chunks\n"
        "  --alias NAME           the model's id in /v1/models and answers (the file's name)\n"
        "  --fallback             a model without a chat template chats in ChatML\n"
        "  --chat-template FILE   chat with this Jinja template (a .jinja file) instead of the model's\n"
        "  --http-threads N       HTTP worker threads (-np + --queue + 8); a stream holds one\n"
        "  --embeddings           POST /v1/embeddings (OpenAI's shape; float or base64): the mean of the\n"
        "                         final hidden state (after the output norm) over the input's tokens, unit\n"
        "                         length, evaluated on a sequence of its own between generation steps\n"
        "  --embeddings-seqs N    sequences kept for embeddings (4): the waiting requests' inputs are\n"
        "                         evaluated N at a time, their rows in one forward\n"
        "  --verbose              one line per request on stderr (and the placement at load)\n"
        "  Sampling defaults for requests that leave them out:\n%s"
        "  SIGTERM or SIGINT: no new requests (503), those accepted finish, then it exits; a second one\n"
        "  stops at once.\n%s%s%s",
        kSamplingHelp, kRequantHelp, kNCpuMoeHelp, kDeviceHelp);
    return 0;
  }
  ModelFlags mf = parse_model_flags(a);
  HttpOptions ho;
  SchedulerOptions so;
  int64_t np = 4, port = 8080, queue = 64, batch = 512, threads = 0;
  a.value(nullptr, "--host", ho.host);
  a.int_value(nullptr, "--port", port);
  a.int_value({"-np", "--parallel"}, np);
  a.value(nullptr, "--api-key", ho.api_key);
  a.int_value(nullptr, "--queue", queue);
  a.int_value("-b", "--batch-size", batch);
  a.int_value(nullptr, "--http-threads", threads);
  std::string alias;
  a.value(nullptr, "--alias", alias);
  const bool fallback = a.flag(nullptr, "--fallback");
  so.embeddings = a.flag(nullptr, "--embeddings");
  // 4: a request's short chunks go 4 to a forward; a sequence costs only the KV pages its input fills.
  so.embed_seqs = 4;
  embed_seqs_flag(a, "--embeddings-seqs", so.embed_seqs);
  std::string template_file;
  a.value(nullptr, "--chat-template", template_file);
  ho.defaults = parse_sampling_flags(a, &ho.seed_fixed);
  if (!a.positional().empty()) a.fail("unexpected argument (the model goes after -m)");
  if (port < 0 || port > 65535) a.fail("--port must be between 0 and 65535");
  if (np < 1 || np > 256) a.fail("-np must be between 1 and 256");
  if (queue < 0 || queue > 100000) a.fail("--queue must be between 0 and 100000");
  if (batch < 1 || batch > 65536) a.fail("--batch-size must be between 1 and 65536");
  if (threads < 0 || threads > 4096) a.fail("--http-threads must be between 1 and 4096 (0: the default)");
  if (ho.host.empty()) a.fail("--host must not be empty");
  ho.port = int(port);
  ho.verbose = mf.params.verbose != 0;
  ho.model_id = alias.empty() ? base_name(mf.path) : alias;
  ho.threads = threads > 0 ? int(threads) : int(np + queue + 8);
  so.max_queue = int32_t(queue);
  so.batch_rows = int32_t(batch);

  // Every thread started from here (the engine's pool at load included)
  // blocks the stop signals; one thread takes them, once the server runs (a
  // SIGTERM during the load stops it as soon as it has started).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone: a failed write, not a dead server

  // The model first: its loader refuses what is no GGUF file (a folder, a FIFO) without reading it.
  mf.params.n_seq = int32_t(np) + (so.embeddings ? so.embed_seqs : 0);  // --embeddings: kept for embedding requests
  fish_model* m = load_or_exit("serve", mf);
  ModelFlags vf = mf;  // the HTTP threads' tokenizer
  vf.params.vocab_only = 1;
  vf.params.verbose = 0;
  fish_model* vocab = load_or_exit("serve", vf);
  fish_chat_template* tmpl = nullptr;
  fish_error* err = nullptr;
  std::string no_template;
  const bool own_template = !template_file.empty();
  const int st = fish_chat_template_load(own_template ? template_file.c_str() : mf.path.c_str(),
                                         fallback ? FISH_CHAT_TEMPLATE_FALLBACK : 0u, &tmpl, &err);
  if (st == FISH_CHAT_NO_TEMPLATE) {
    no_template = "the model has no chat template: use /v1/completions, or start fish serve with --fallback for ChatML";
    std::fprintf(stderr, "fish serve: %s has no chat template: /v1/chat/completions answers 400 (--fallback: ChatML)\n",
                 mf.path.c_str());
  } else if (st != FISH_CHAT_OK) {
    std::fprintf(stderr, "fish serve: %s\n", fish_error_message(err));
    fish_error_free(err);
    fish_model_free(vocab);
    fish_model_free(m);
    return 1;
  } else if (fish_chat_template_is_fallback(tmpl)) {
    std::fprintf(stderr, "fish serve: %s has no chat template; chatting in ChatML (--fallback)\n", mf.path.c_str());
  }
  fish_error_free(err);
  err = nullptr;
  if (own_template) {
    // A template file has no BOS / EOS texts of its own: the model's.
    fish_model_info vi{};
    vi.struct_size = sizeof vi;
    fish_model_get_info(vocab, &vi);
    for (auto [name, id] : {std::pair{"bos_token", vi.bos}, {"eos_token", vi.eos}}) {
      char buf[256];
      const int32_t n = id >= 0 ? fish_token_to_piece(vocab, id, buf, sizeof buf, 1) : 0;
      ho.template_vars.emplace_back(name, std::string(buf, size_t(n > 0 ? n : 0)));
    }
  }

  int status = 0;
  {
    ServeCounters counters;
    Scheduler sched(m, so, &counters);
    HttpServer http(ho, &sched, &counters, vocab, tmpl, no_template);
    std::string why;
    if (!http.bind(&why)) {
      std::fprintf(stderr, "fish serve: %s\n", why.c_str());
      status = 1;
    } else {
      fish_model_info info{};
      info.struct_size = sizeof info;
      fish_model_get_info(m, &info);
      // Before the listening line: whoever waits for that one has read this.
      if (tmpl)
        std::fprintf(stderr, "fish serve: tool calls: %s\n",
                     http.tool_family() == ToolFamily::kNone
                         ? "none (the chat template teaches no format fish parses: replies stay text)"
                         : tool_family_name(http.tool_family()));
      std::fprintf(stderr, "fish serve: listening on http://%s:%d (model %s, -np %lld, context %d per sequence, %s%s%s)\n",
                   ho.host.c_str(), http.port(), ho.model_id.c_str(), (long long)np, info.n_ctx, info.backend,
                   ho.api_key.empty() ? "" : ", API key required",
                   so.embeddings ? (", embeddings on, " + std::to_string(so.embed_seqs) + " at a time").c_str() : "");
      std::atomic<bool> stopped{false};
      std::thread watcher([&] { watch_signals(set, sched, http, stopped); });
      http.listen();
      if (!stopped) pthread_kill(watcher.native_handle(), SIGUSR1);
      watcher.join();
      std::fprintf(stderr, "fish serve: stopped\n");
    }
  }
  fish_model_free(vocab);
  fish_model_free(m);
  fish_chat_template_free(tmpl);
  return status;
}

static const Command reg{"serve", "an OpenAI-compatible HTTP server (continuous batching over sequences)", &cmd_serve};
