// fish chat: an interactive conversation with a model through its chat
// template, the conversation kept in the KV cache (each turn evaluates only
// what is new: chat_session.h), input as chat_input.h reads it.
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "chat_input.h"
#include "chat_session.h"
#include "cli_model.h"
#include "command.h"
#include "fish/fish_chat.h"
#include "sampling_flags.h"

using namespace fish::cli;

namespace {

volatile sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) { g_interrupted = 1; }

// Ctrl-C stops a reply or drops the line being typed instead of leaving.
// SIGINT stays blocked in every thread (the engine's pool inherits the mask
// at load): a reply polls for it between tokens (sigtimedwait), the input
// wait unblocks it atomically (ppoll; the handler sets the flag). A Ctrl-C
// while the model loads ends fish chat once the load is done.
void block_sigint(sigset_t* set) {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigprocmask(SIG_BLOCK, set, nullptr);
}

bool sigint_pending(const sigset_t& set) {
  const timespec zero{0, 0};
  return sigtimedwait(&set, nullptr, &zero) == SIGINT;  // takes it
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

constexpr const char* kInputHelp =
    "  Input: a line is one message; end a line with \\ to go on with the next one, or put the\n"
    "  lines between two lines that are exactly \"\"\". /reset starts a new conversation (the\n"
    "  system prompt stays), /quit or /exit (or the end of input, Ctrl-D) leaves, /help shows this.\n"
    "  Ctrl-C stops the reply being written (it stays in the conversation as far as it went).\n";

}  // namespace

static int cmd_chat(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf(
        "usage: fish chat -m MODEL [--system TEXT] [-n N] [--fallback] [--ignore-eos] [--json | --json-schema FILE]\n"
        "                 [--verbose] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
        "                 [--repeat-last-n N] [--seed S] [-t N] [-c CTX] [-ngl N] [--requant MODE]\n"
        "  Chats with the model through its chat template (tokenizer.chat_template), streaming\n"
        "  each reply to stdout as it is generated, followed by a newline. The conversation stays\n"
        "  in the KV cache: a turn evaluates only the tokens the cache does not hold yet.\n"
        "  On a terminal it prompts with \"> \"; in a pipe it reads messages from stdin and writes\n"
        "  the replies alone to stdout.\n%s"
        "  --system TEXT  the system prompt. -n N  at most N tokens per reply (0: until the\n"
        "  model ends it or the context is full). --fallback  a model without a chat template\n"
        "  chats in ChatML. --ignore-eos  never end a reply on an end-of-generation token.\n"
        "  --json  JSON mode: every reply is one JSON object, ended where it closes.\n"
        "  --json-schema FILE  every reply is one JSON value valid under the JSON Schema in FILE\n"
        "  (what is enforced: fish run --help), ended where it is complete.\n"
        "  --verbose  per turn on stderr: prompt tokens reused from the cache and evaluated,\n"
        "  tokens generated, rates (and the model's placement at load).\n%s%s%s%s",
        kInputHelp, kSamplingHelp, kRequantHelp, kNCpuMoeHelp, kDeviceHelp);
    return 0;
  }
  ModelFlags mf = parse_model_flags(a);
  std::string system;
  a.value(nullptr, "--system", system);
  int64_t n_predict = 0;
  a.int_value("-n", "--n-predict", n_predict);
  const bool fallback = a.flag(nullptr, "--fallback");
  const bool ignore_eos = a.flag(nullptr, "--ignore-eos");
  const JsonFlags jf = parse_json_flags(a);
  const fish_sampler_params sp = parse_sampling_flags(a);
  if (!a.positional().empty()) a.fail("unexpected argument (the model goes after -m)");
  if (n_predict < 0) a.fail("-n must be >= 0");
  const bool verbose = mf.params.verbose != 0;
  const bool tty = isatty(STDIN_FILENO) == 1;

  // The model first: its loader refuses what is no GGUF file (a folder, a FIFO) without reading it.
  sigset_t sigint;
  block_sigint(&sigint);
  fish_model* m = load_or_exit("chat", mf);
  if (sigint_pending(sigint)) {
    fish_model_free(m);
    return 130;
  }

  fish_chat_template* tmpl = nullptr;
  fish_error* err = nullptr;
  const int st = fish_chat_template_load(mf.path.c_str(), fallback ? FISH_CHAT_TEMPLATE_FALLBACK : 0u, &tmpl, &err);
  if (st != FISH_CHAT_OK) {
    std::fprintf(stderr, "fish chat: %s%s\n", fish_error_message(err),
                 st == FISH_CHAT_NO_TEMPLATE ? "; --fallback chats in ChatML instead" : "");
    fish_error_free(err);
    fish_model_free(m);
    return 1;
  }
  if (fish_chat_template_is_fallback(tmpl))
    std::fprintf(stderr, "fish chat: %s has no chat template; using ChatML (--fallback)\n", mf.path.c_str());

  int status = 0;
  {
    ChatSession session(m, tmpl, system, sp, ignore_eos, jf);
    ChatInput input(STDIN_FILENO, tty, &g_interrupted);
    if (tty) std::fprintf(stderr, "fish chat: %s\n%s", mf.path.c_str(), kInputHelp);
    for (int turn = 1;;) {
      std::string msg;
      const ChatInput::Status in = input.read_message(&msg);
      if (in == ChatInput::Status::kEof) {
        if (tty) write_all(STDOUT_FILENO, "\n");
        break;
      }
      if (in == ChatInput::Status::kInterrupted) {
        if (tty) {
          write_all(STDOUT_FILENO, "\n");
          std::fprintf(stderr, "(/quit or Ctrl-D leaves)\n");
        }
        continue;
      }
      const std::string cmd = trim(msg);
      if (cmd.empty()) continue;
      if (cmd == "/quit" || cmd == "/exit") break;
      if (cmd == "/help") {
        std::fprintf(stderr, "%s", kInputHelp);
        continue;
      }
      if (cmd == "/reset") {
        session.reset();
        if (tty || verbose) std::fprintf(stderr, "fish chat: a new conversation\n");
        continue;
      }
      ChatTurnStats ts;
      std::string error;
      bool write_ok = true;
      const bool ok = session.reply(
          msg, n_predict, [&](const std::string& p) { write_ok = write_all(STDOUT_FILENO, p) && write_ok; },
          [&] { return sigint_pending(sigint); }, &ts, &error);
      if (ts.prompt_tokens > 0 && (ok || ts.generated > 0)) write_all(STDOUT_FILENO, "\n");
      if (!write_ok) {
        std::fprintf(stderr, "fish chat: cannot write the reply to stdout\n");
        status = 1;
        break;
      }
      if (!ok) {
        std::fprintf(stderr, "fish chat: %s\n", error.c_str());
        status = 1;
        continue;
      }
      if (ts.interrupted) std::fprintf(stderr, "fish chat: reply stopped (Ctrl-C)\n");
      if (ts.context_full)
        std::fprintf(stderr, "fish chat: the context is full; /reset starts a new conversation (-c sets its size)\n");
      if (verbose)
        std::fprintf(stderr,
                     "fish chat: turn %d: prompt %d tokens (%d reused, %d evaluated, %.1f tok/s); "
                     "generated %d tokens (%.1f tok/s)\n",
                     turn, ts.prompt_tokens, ts.reused, ts.evaluated,
                     ts.prompt_seconds > 0 ? ts.evaluated / ts.prompt_seconds : 0.0, ts.generated,
                     ts.gen_seconds > 0 ? ts.generated / ts.gen_seconds : 0.0);
      ++turn;
    }
  }
  fish_model_free(m);
  fish_chat_template_free(tmpl);
  return status;
}

static const Command reg{"chat", "chat with a model through its chat template (interactive, or in a pipe)", &cmd_chat};
