// `fish chat` end to end, through a pipe and on a pseudo-terminal, on the
// shared stories260K model (no chat template: the ChatML fallback) and on a
// copy of it that carries real templates, greedy (--temp 0): each reply is
// exactly the continuation `fish run` gives for the conversation rendered so
// far, the second turn evaluates only what the KV cache lacks, /reset and
// /quit, multi-line input, Ctrl-C stopping a reply, the context's end.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "process_util.h"
#include "test_paths.h"
#include "test_skip.h"

using namespace fish::test;

namespace {

const std::string kStories = "stories260K.gguf";

bool have_model() {
  std::ifstream f(model_path(kStories));
  return f.good();
}

ProcResult run_fish(std::vector<std::string> args, const std::string& input = "") {
  args.insert(args.begin(), bin_path("fish"));
  return run_process(args, input);
}

std::vector<std::string> chat_args(const std::string& model, std::vector<std::string> more) {
  std::vector<std::string> a = {"chat", "-m", model, "--temp", "0", "-t", "2", "-ngl", "0"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::string chatml(const std::vector<std::pair<std::string, std::string>>& msgs) {
  std::string s;
  for (const auto& [role, content] : msgs) s += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
  return s + "<|im_start|>assistant\n";
}

// fish run's greedy continuation of prompt (its final newline removed).
std::string run_greedy(const std::string& model, const std::string& prompt, int n) {
  const ProcResult r = run_fish({"run", "-m", model, "-p", prompt, "-n", std::to_string(n), "--temp", "0", "-t", "2", "-ngl", "0"});
  REQUIRE(r.status == 0);
  REQUIRE(!r.out.empty());
  REQUIRE(r.out.back() == '\n');
  return r.out.substr(0, r.out.size() - 1);
}

size_t n_tokens(const std::string& model, const std::string& text) {
  const ProcResult r = run_fish({"tokenize", "-m", model, "-p", text});
  REQUIRE(r.status == 0);
  std::istringstream in(r.out);
  size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

struct TurnStats {
  int prompt = -1, reused = -1, evaluated = -1, generated = -1;
};

// The --verbose lines "fish chat: turn N: prompt P tokens (R reused, E evaluated, ...); generated G tokens".
std::vector<TurnStats> turns(const std::string& err) {
  std::vector<TurnStats> t;
  const std::regex re(R"(fish chat: turn (\d+): prompt (\d+) tokens \((\d+) reused, (\d+) evaluated, [^)]*\); generated (\d+) tokens)");
  for (std::sregex_iterator it(err.begin(), err.end(), re), end; it != end; ++it) {
    REQUIRE(std::stoi((*it)[1]) == int(t.size()) + 1);
    t.push_back({std::stoi((*it)[2]), std::stoi((*it)[3]), std::stoi((*it)[4]), std::stoi((*it)[5])});
  }
  return t;
}

std::string tmp_path(const std::string& name) { return "/tmp/fish-chatcmd-" + std::to_string(::getpid()) + "-" + name; }

// stories260K with a chat template of its own (a real model's text).
std::string with_template(const std::string& name, const std::string& tmpl) {
  const auto src = fish::gguf::File::open(model_path(kStories));
  fish::gguf::Writer w;
  for (const auto& kv : src->kvs()) w.set_value(kv.key, kv.value);
  for (const auto& t : src->tensors())
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  w.set_str("tokenizer.chat_template", tmpl);
  const std::string path = tmp_path(name);
  w.write(path);
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string crlf(std::string s) {  // what a terminal shows for s (ONLCR)
  std::string o;
  for (char c : s) o += c == '\n' ? std::string("\r\n") : std::string(1, c);
  return o;
}

}  // namespace

TEST_CASE("fish chat: a model without a chat template is refused, --fallback chats in ChatML", "[chat][e2e][cli]") {
  if (!have_model()) FISH_SKIP("no " + model_path(kStories));
  const std::string m = model_path(kStories);
  ProcResult r = run_fish(chat_args(m, {}), "Hello\n");
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "fish chat: " + m +
                     ": the model has no chat template (no tokenizer.chat_template in its metadata); --fallback chats "
                     "in ChatML instead\n");
  r = run_fish(chat_args(m, {"--fallback", "-n", "4"}), "Hello\n");
  CHECK(r.status == 0);
  CHECK(r.err == "fish chat: " + m + " has no chat template; using ChatML (--fallback)\n");
  CHECK(r.out == run_greedy(m, chatml({{"user", "Hello"}}), 4) + "\n");
  r = run_fish({"chat", "-m", m, "--top-p", "2"});
  CHECK(r.status == 2);
  CHECK(r.err.rfind("fish chat: --top-p = 2", 0) == 0);
}

TEST_CASE("fish chat: in a pipe each reply is fish run's continuation of the conversation so far, "
          "and the second turn evaluates only the new tokens", "[chat][e2e][cli]") {
  if (!have_model()) FISH_SKIP("no " + model_path(kStories));
  const std::string m = model_path(kStories);
  const ProcResult r = run_fish(chat_args(m, {"--fallback", "-n", "16", "--verbose"}), "Hello\nHow are you\n");
  REQUIRE(r.status == 0);
  const std::string p1 = chatml({{"user", "Hello"}});
  const std::string reply1 = run_greedy(m, p1, 16);
  const std::string p2 = chatml({{"user", "Hello"}, {"assistant", reply1}, {"user", "How are you"}});
  const std::string reply2 = run_greedy(m, p2, 16);
  CHECK(r.out == reply1 + "\n" + reply2 + "\n");
  const auto t = turns(r.err);
  REQUIRE(t.size() == 2);
  // Turn 1: the whole rendering. Turn 2: the cache holds turn 1's prompt and
  // the 15 reply tokens fed back (the 16th was sampled, never evaluated); the
  // rest of the new rendering is all that is evaluated.
  CHECK(t[0].prompt == int(n_tokens(m, p1)));
  CHECK(t[0].reused == 0);
  CHECK(t[0].evaluated == t[0].prompt);
  CHECK(t[0].generated == 16);
  CHECK(t[1].prompt == int(n_tokens(m, p2)));
  CHECK(t[1].reused == t[0].prompt + 15);
  CHECK(t[1].evaluated == t[1].prompt - t[1].reused);
  CHECK(t[1].evaluated < t[1].prompt / 2);
}

// --json: every reply is one JSON object, the constraint starting afresh each
// turn (the random-weight synth-tiny closes its objects soon), and the reply
// ends where the object closes even with --ignore-eos.
TEST_CASE("fish chat: --json makes every reply one JSON object", "[chat][e2e][cli]") {
  const std::string m = model_path("synth-tiny-Q4_K_M.gguf");
  const ProcResult r = run_fish(chat_args(m, {"--fallback", "--json", "--ignore-eos", "-n", "200", "--temp", "1",
                                              "--seed", "2"}),
                                "Describe a cat.\nAnd a dog.\nAnd a bird.\n");
  REQUIRE(r.status == 0);
  std::vector<std::string> replies;
  for (size_t a = 0, b; (b = r.out.find('\n', a)) != std::string::npos; a = b + 1) replies.push_back(r.out.substr(a, b - a));
  REQUIRE(replies.size() == 3);
  for (const std::string& reply : replies) {
    INFO(reply);
    const size_t first = reply.find_first_not_of(" \t\r"), last = reply.find_last_not_of(" \t\r");
    REQUIRE(first != std::string::npos);
    CHECK(reply[first] == '{');
    CHECK(reply[last] == '}');
  }
}

// --json-schema: every reply is one value under the schema, the constraint
// starting afresh each turn.
TEST_CASE("fish chat: --json-schema makes every reply follow the schema", "[chat][e2e][cli][json]") {
  const std::string m = model_path("synth-tiny-Q4_K_M.gguf");
  const std::string schema = "/tmp/fish-chat-schema-" + std::to_string(::getpid()) + ".json";
  std::ofstream(schema) << R"({"type":"object","properties":{"answer":{"type":"string","maxLength":10},)"
                           R"("sure":{"type":"boolean"}},"required":["answer","sure"],"additionalProperties":false})";
  const ProcResult r = run_fish(chat_args(m, {"--fallback", "--json-schema", schema, "-n", "3000", "--temp", "1",
                                              "--seed", "4"}),
                                "Describe a cat.\nAnd a dog.\n");
  std::remove(schema.c_str());
  REQUIRE(r.status == 0);
  // Replies end with the newline fish chat adds; inside a reply newlines are
  // whitespace between tokens, so the replies are found by their braces.
  std::vector<std::string> replies;
  std::string cur;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : r.out) {
    if (depth > 0 || c == '{') cur += c;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"' && depth > 0) in_string = true;
    else if (c == '{') ++depth;
    else if (c == '}' && --depth == 0) replies.push_back(cur), cur.clear();
  }
  INFO(r.out);
  REQUIRE(replies.size() == 2);
  for (const std::string& reply : replies) {
    INFO(reply);
    // {"answer": "...", "sure": true|false} in either order, nothing else.
    static const std::regex one(R"re(\{\s*("answer"\s*:\s*"[^"\\]*(\\.[^"\\]*)*"|"sure"\s*:\s*(true|false))\s*,\s*)re"
                                R"re(("answer"\s*:\s*"[^"\\]*(\\.[^"\\]*)*"|"sure"\s*:\s*(true|false))\s*\})re");
    CHECK(std::regex_match(reply, one));
    CHECK(reply.find("\"answer\"") != std::string::npos);
    CHECK(reply.find("\"sure\"") != std::string::npos);
  }
}

TEST_CASE("fish chat: /reset starts over (the cache still serves the same prompt), /quit leaves", "[chat][e2e][cli]") {
  if (!have_model()) FISH_SKIP("no " + model_path(kStories));
  const std::string m = model_path(kStories);
  const ProcResult r =
      run_fish(chat_args(m, {"--fallback", "-n", "8", "--verbose"}), "Hello\n/reset\n  \nHello\n/quit\nNever answered\n");
  REQUIRE(r.status == 0);
  const std::string reply = run_greedy(m, chatml({{"user", "Hello"}}), 8);
  CHECK(r.out == reply + "\n" + reply + "\n");
  CHECK(r.err.find("fish chat: a new conversation\n") != std::string::npos);
  const auto t = turns(r.err);
  REQUIRE(t.size() == 2);
  // After the reset the rendering is turn 1's prompt again: all of it but the
  // last token (evaluated again for its logits) comes from the cache.
  CHECK(t[1].prompt == t[0].prompt);
  CHECK(t[1].reused == t[0].prompt - 1);
  CHECK(t[1].evaluated == 1);
}

TEST_CASE("fish chat: a line ending in a backslash goes on, \"\"\" blocks, --system", "[chat][e2e][cli]") {
  if (!have_model()) FISH_SKIP("no " + model_path(kStories));
  const std::string m = model_path(kStories);
  const std::string input = "line one\\\nline two\n/reset\n\"\"\"\nline one\nline two\n\"\"\"\n";
  ProcResult r = run_fish(chat_args(m, {"--fallback", "-n", "8"}), input);
  REQUIRE(r.status == 0);
  const std::string reply = run_greedy(m, chatml({{"user", "line one\nline two"}}), 8);
  CHECK(r.out == reply + "\n" + reply + "\n");
  // An unclosed block ends with the input; CRLF line ends are taken as LF.
  r = run_fish(chat_args(m, {"--fallback", "-n", "8"}), "\"\"\"\r\nline one\r\nline two");
  CHECK(r.status == 0);
  CHECK(r.out == reply + "\n");
  r = run_fish(chat_args(m, {"--fallback", "-n", "8", "--system", "Be kind."}), "Hi\n");
  CHECK(r.status == 0);
  CHECK(r.out == run_greedy(m, chatml({{"system", "Be kind."}, {"user", "Hi"}}), 8) + "\n");
}

TEST_CASE("fish chat: a real template from the GGUF (BOS once), and one that refuses the conversation",
          "[chat][e2e][cli]") {
  if (!have_model()) FISH_SKIP("no " + model_path(kStories));
  const std::string dir = shared_path("models/templates/");
  const std::string mistral = slurp(dir + "mistralai-Mistral-Nemo-Instruct-2407.jinja");
  const std::string gemma = slurp(dir + "google-gemma-2-2b-it.jinja");
  if (mistral.empty() || gemma.empty()) FISH_SKIP("no templates in " + dir);
  const std::string mm = with_template("mistral.gguf", mistral), gm = with_template("gemma.gguf", gemma);
  ProcResult r = run_fish(chat_args(mm, {"-n", "8", "--verbose"}), "Hi\nAnd then?\n");
  CHECK(r.status == 0);
  // The template writes bos_token itself: the prompt starts with one BOS, as
  // fish tokenize --special --no-bos reads the rendering.
  const std::string p1 = "<s>[INST]Hi[/INST]";
  const ProcResult tok = run_fish({"tokenize", "-m", mm, "-p", p1, "--special", "--no-bos"});
  REQUIRE(tok.status == 0);
  std::istringstream in(tok.out);
  int n = 0;
  for (std::string w; in >> w;) ++n;
  REQUIRE(tok.out.rfind("1 ", 0) == 0);
  const auto t = turns(r.err);
  REQUIRE(t.size() == 2);
  CHECK(t[0].prompt == n);
  CHECK(t[1].reused >= t[0].prompt);
  CHECK(t[1].evaluated == t[1].prompt - t[1].reused);
  r = run_fish(chat_args(gm, {"-n", "8", "--system", "Be brief."}), "Hi\n");
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "fish chat: the chat template refused the conversation: System role not supported\n");
  std::remove(mm.c_str());
  std::remove(gm.c_str());
}

TEST_CASE("fish chat: the context's end stops a reply, a conversation that does not fit is refused",
          "[chat][e2e][cli]") {
  if (!have_model()) FISH_SKIP("no " + model_path(kStories));
  const std::string m = model_path(kStories);
  const size_t p1 = n_tokens(m, chatml({{"user", "Hello"}}));
  const int ctx = int(p1) + 6;
  const ProcResult r = run_fish(chat_args(m, {"--fallback", "--ignore-eos", "-c", std::to_string(ctx), "--verbose"}),
                            "Hello\nAgain\n");
  CHECK(r.status == 1);
  const auto t = turns(r.err);
  REQUIRE(t.size() == 1);
  CHECK(t[0].generated == 7);  // positions p1 .. ctx-1 take 6 fed tokens; the 7th is sampled at the end
  CHECK(r.err.find("fish chat: the context is full; /reset starts a new conversation (-c sets its size)\n") !=
        std::string::npos);
  CHECK(r.err.find(") does not fit the context (" + std::to_string(ctx) +
                   "): /reset starts a new one, -c sets a larger context\n") != std::string::npos);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') >= 1);
}

TEST_CASE("fish chat: on a terminal it prompts, streams, and leaves on /quit or Ctrl-D", "[chat][e2e][cli][pty]") {
  if (!have_model()) FISH_SKIP("no " + model_path(kStories));
  const std::string m = model_path(kStories);
  const std::string reply = run_greedy(m, chatml({{"user", "Hello"}}), 8);
  {
    PtyProcess p({bin_path("fish"), "chat", "-m", m, "--fallback", "--temp", "0", "-t", "2", "-ngl", "0", "-n", "8"});
    REQUIRE(p.wait_for("> ") != std::string::npos);
    CHECK(p.output().find("fish chat: " + m + "\r\n") != std::string::npos);  // the banner (stderr is the terminal too)
    CHECK(p.output().find("/reset starts a new conversation") != std::string::npos);
    const size_t at = p.output().size();
    p.type("Hello\n");
    const size_t r = p.wait_for(crlf(reply) + "\r\n> ", at);
    CHECK(r != std::string::npos);
    // Ctrl-C at the prompt drops the line being typed.
    const size_t at2 = p.output().size();
    p.type("half a line");
    REQUIRE(p.wait_for("half a line", at2) != std::string::npos);
    p.type("\x03");
    CHECK(p.wait_for("(/quit or Ctrl-D leaves)", at2) != std::string::npos);
    CHECK(p.wait_for("> ", at2 + 10) != std::string::npos);
    p.type("/quit\n");
    CHECK(p.wait_exit() == 0);
  }
  {
    PtyProcess p({bin_path("fish"), "chat", "-m", m, "--fallback", "--temp", "0", "-t", "2", "-ngl", "0", "-n", "8"});
    REQUIRE(p.wait_for("> ") != std::string::npos);
    p.type("\x04");  // Ctrl-D on an empty line: the end of input
    CHECK(p.wait_exit() == 0);
  }
}

TEST_CASE("fish chat: on a terminal Ctrl-C stops the reply and the chat goes on", "[chat][e2e][cli][pty]") {
  if (!have_model()) FISH_SKIP("no " + model_path(kStories));
  const std::string m = model_path(kStories);
  // --ignore-eos: the reply would run to the context's end (2048 positions),
  // far longer than the moment the test takes to press Ctrl-C.
  PtyProcess p({bin_path("fish"), "chat", "-m", m, "--fallback", "--temp", "0", "-t", "2", "-ngl", "0", "--ignore-eos", "--verbose"});
  REQUIRE(p.wait_for("> ") != std::string::npos);
  size_t at = p.output().size();
  p.type("Hello\n");
  REQUIRE(p.wait_for("Hello\r\n", at) != std::string::npos);
  at = p.wait_for("Hello\r\n", at) + 7;
  REQUIRE(p.wait_output(at));
  p.type("\x03");
  const size_t stopped = p.wait_for("fish chat: reply stopped (Ctrl-C)", at);
  REQUIRE(stopped != std::string::npos);
  CHECK(p.output().find("the context is full") == std::string::npos);
  REQUIRE(p.wait_for("> ", stopped) != std::string::npos);
  const size_t at2 = p.output().size();
  p.type("Again\n");
  REQUIRE(p.wait_for("Again\r\n", at2) != std::string::npos);
  REQUIRE(p.wait_output(p.wait_for("Again\r\n", at2) + 7));
  p.type("\x03");
  // The stopped reply stays in the conversation: turn 2 reuses turn 1's cache.
  const size_t t2 = p.wait_for("fish chat: turn 2: prompt ", at2);
  REQUIRE(t2 != std::string::npos);
  REQUIRE(p.wait_for("\r\n> ", t2) != std::string::npos);
  const auto t = turns(p.output());
  REQUIRE(t.size() == 2);
  CHECK(t[0].generated < 2000);
  CHECK(t[1].generated < 2000);
  CHECK(t[1].reused >= t[0].prompt);
  p.type("/quit\n");
  CHECK(p.wait_exit() == 0);
}

TEST_CASE("fish chat: a FIFO or a folder as the model is refused, not waited on", "[chat][e2e][cli]") {
  const std::string fifo = tmp_path("fifo.gguf");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  ProcResult r = run_fish({"chat", "-m", fifo, "--fallback"}, "Hello\n");
  CHECK(r.status == 1);
  CHECK(r.err == "fish chat: " + fifo + ": not a regular file (a FIFO)\n");
  r = run_fish({"chat", "-m", "/tmp"}, "Hello\n");
  CHECK(r.status == 1);
  CHECK(r.err == "fish chat: /tmp: not a regular file (a directory)\n");
  // The template reader alone (fish template) does not wait on a FIFO either.
  r = run_fish({"template", fifo, "--json", "-"}, R"({"messages": []})");
  CHECK(r.status == 1);
  CHECK(r.err == "fish template: " + fifo + ": not a regular file\n");
  std::remove(fifo.c_str());
}
