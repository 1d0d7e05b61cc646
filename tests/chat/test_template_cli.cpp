// `fish template` end to end: the binary renders a real template with a JSON
// conversation to stdout exactly, reports a template's raise_exception on
// stderr with exit status 1, reads a GGUF's template and token texts, and says
// clearly when a model has none (--fallback: ChatML).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "chat/jinja_json.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "test_skip.h"

namespace j = fish::chat::jinja;
using namespace fish::test;

namespace {

struct Run {
  std::string out, err;
  int status = -1;  // exit status; -1 when killed by a signal
};

std::string tmp_path(const std::string& name) { return "/tmp/fish-tplcli-" + std::to_string(::getpid()) + "-" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

Run fish_template(const std::string& args, const std::string& stdin_text = "") {
  const std::string o = tmp_path("stdout"), e = tmp_path("stderr"), i = tmp_path("stdin");
  spit(i, stdin_text);
  const std::string cmd = bin_path("fish") + " template " + args + " <" + i + " >" + o + " 2>" + e;
  const int rc = std::system(cmd.c_str());
  Run r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(o);
  r.err = slurp(e);
  std::remove(o.c_str());
  std::remove(e.c_str());
  std::remove(i.c_str());
  return r;
}

// The inputs of the case `which` of `tmpl` in cases.json, with "now" added, as
// JSON text; sets *expected to its expected text or error.
std::string case_input(const j::Value& cases, const std::string& tmpl, const std::string& which, std::string* expected) {
  for (const j::Value& c : cases.items()) {
    if (c.dict().find("template")->get_string() != tmpl || c.dict().find("case")->get_string() != which) continue;
    const j::Value* e = c.dict().find("expected");
    *expected = e ? e->get_string() : c.dict().find("error")->get_string();
    std::string in = j::to_json(*c.dict().find("inputs"));
    in.insert(1, "\"now\": \"2026-12-01T12:00:00\", ");
    return in;
  }
  FAIL("no case " + tmpl + " / " + which);
  return "";
}

}  // namespace

TEST_CASE("chat cli: fish template: a real template and conversation render to stdout exactly", "[chat][e2e][cli]") {
  const std::string dir = shared_path("models/templates/");
  const std::string cases_text = slurp(dir + "cases.json");
  if (cases_text.empty()) FISH_SKIP("no " + dir + "cases.json (the shared model data is not here)");
  const j::Value cases = j::parse_json(cases_text);
  const std::string in = tmp_path("in.json");
  std::string expected;
  // Llama 3.2: tools in the first user message and strftime_now's date.
  spit(in, case_input(cases, "meta-llama-Llama-3.2-3B-Instruct.jinja", "tools", &expected));
  Run r = fish_template(dir + "meta-llama-Llama-3.2-3B-Instruct.jinja --json " + in);
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out == expected);  // byte for byte, no newline added
  // The input from stdin.
  const std::string qwen = case_input(cases, "Qwen-Qwen3-0.6B.jinja", "unicode-whitespace", &expected);
  r = fish_template(dir + "Qwen-Qwen3-0.6B.jinja --json -", qwen);
  CHECK(r.status == 0);
  CHECK(r.out == expected);
  std::remove(in.c_str());
}

TEST_CASE("chat cli: fish template: raise_exception prints the template's message and exits 1", "[chat][e2e][cli]") {
  const std::string dir = shared_path("models/templates/");
  const std::string cases_text = slurp(dir + "cases.json");
  if (cases_text.empty()) FISH_SKIP("no " + dir + "cases.json (the shared model data is not here)");
  const j::Value cases = j::parse_json(cases_text);
  const std::string in = tmp_path("raise.json");
  std::string error;
  spit(in, case_input(cases, "google-gemma-2-2b-it.jinja", "system-multi", &error));
  const Run r = fish_template(dir + "google-gemma-2-2b-it.jinja --json " + in);
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err == error + "\n");
  CHECK(error == "System role not supported");
  std::remove(in.c_str());
}

TEST_CASE("chat cli: fish template: a GGUF's template and token texts, and a GGUF without one", "[chat][e2e][cli]") {
  const std::string with = tmp_path("with.gguf"), without = tmp_path("without.gguf"), in = tmp_path("in.json");
  {
    fish::gguf::Writer w;
    w.set_str("general.architecture", "llama");
    w.set_str("tokenizer.ggml.model", "llama");  // SentencePiece: BOS 1, EOS 2 by default
    w.set_str_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
    w.set_str("tokenizer.chat_template",
              "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}");
    w.write(with);
    w.remove("tokenizer.chat_template");
    w.write(without);
  }
  spit(in, R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})");
  Run r = fish_template(with + " --json " + in);
  CHECK(r.status == 0);
  CHECK(r.out == "<s>[user] Hi</s>[assistant] Hello</s>");
  // The input's own token texts win over the model's.
  spit(in, R"({"messages": [{"role": "user", "content": "Hi"}], "bos_token": "B", "eos_token": "E"})");
  r = fish_template(with + " --json " + in);
  CHECK(r.out == "B[user] HiE");

  r = fish_template(without + " --json " + in);
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "fish template: " + without +
                     ": the model has no chat template (no tokenizer.chat_template in its metadata); --fallback "
                     "renders ChatML instead\n");
  spit(in, R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})");
  r = fish_template(without + " --fallback --json " + in);
  CHECK(r.status == 0);
  CHECK(r.out == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(r.err == "fish template: " + without + " has no chat template; rendering the ChatML fallback\n");
  std::remove(with.c_str());
  std::remove(without.c_str());
  std::remove(in.c_str());
}

TEST_CASE("chat cli: fish template: malformed templates, bad input and usage errors", "[chat][e2e][cli]") {
  const std::string tpl = tmp_path("bad.jinja"), in = tmp_path("in.json");
  spit(tpl, "line one\n{% for m in messages %}{{ m.content }\n");
  spit(in, R"({"messages": []})");
  Run r = fish_template(tpl + " --json " + in);
  CHECK(r.status == 1);
  CHECK(r.err == "fish template: " + tpl + ": template syntax error at line 2, column 37: unexpected '}'\n");
  spit(tpl, "{{ messages[0].content.upper() }}");
  r = fish_template(tpl + " --json " + in);
  CHECK(r.status == 1);
  CHECK(r.err == "fish template: template error at line 1, column 15: list object has no element 0\n");
  spit(in, R"({"messages": [}])");
  r = fish_template(tpl + " --json " + in);
  CHECK(r.status == 1);
  CHECK(r.err == "fish template: invalid JSON at line 1, column 15: unexpected character '}'\n");
  r = fish_template(tpl);
  CHECK(r.status == 2);
  CHECK(r.err == "fish template: missing --json INPUT.json\n");
  r = fish_template(tmp_path("no-such.jinja") + " --json " + in);
  CHECK(r.status == 1);
  CHECK(r.err == "fish template: " + tmp_path("no-such.jinja") + ": cannot open\n");
  std::remove(tpl.c_str());
  std::remove(in.c_str());
}
