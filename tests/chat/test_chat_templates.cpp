// The real chat templates of ../shared/models/templates against the exact
// text Python's jinja2 renders for them (cases.json: 50 conversations over 10
// templates, two of them refused by the template with raise_exception), read
// in place. Then the ChatTemplate API, the chat input JSON, the template and
// BOS/EOS texts of a GGUF, and the fallback for a model without a template.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "chat/jinja_json.h"
#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"
#include "test_skip.h"

namespace chat = fish::chat;
namespace j = fish::chat::jinja;
using namespace fish::test;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tmp_path(const std::string& name) { return "/tmp/fish-chat-" + std::to_string(::getpid()) + "-" + name; }

}  // namespace

TEST_CASE("chat templates: all cases of ../shared/models/templates match jinja2 byte for byte", "[chat][templates]") {
  const std::string dir = shared_path("models/templates/");
  const std::string cases_text = slurp(dir + "cases.json");
  if (cases_text.empty()) FISH_SKIP("no " + dir + "cases.json (the shared model data is not here)");
  const j::Value cases = j::parse_json(cases_text);
  REQUIRE(cases.is_list());
  REQUIRE(cases.items().size() == 50);
  // strftime_now's date in the reference renderings (README.md there).
  const j::DateTime now{2026, 12, 1, 12, 0, 0, 0};
  int matched = 0, raised = 0;
  std::set<std::string> templates;
  for (const j::Value& c : cases.items()) {
    const std::string name = c.dict().find("template")->get_string();
    const std::string which = name + " / " + c.dict().find("case")->get_string();
    INFO(which);
    templates.insert(name);
    const chat::ChatTemplate tpl(slurp(dir + name));
    chat::ChatInput in = chat::parse_chat_input(j::to_json(*c.dict().find("inputs")));
    in.now = now;
    if (const j::Value* expected = c.dict().find("expected")) {
      const std::string got = tpl.render(in);
      CHECK(got == expected->get_string());
      matched += got == expected->get_string();
    } else {
      const std::string error = c.dict().find("error")->get_string();
      try {
        tpl.render(in);
        FAIL("rendered, but the template should have raised: " + error);
      } catch (const j::Error& e) {
        CHECK(e.kind() == j::Error::Kind::Raised);
        CHECK(std::string(e.what()) == error);
        raised += e.kind() == j::Error::Kind::Raised && e.what() == error;
      }
    }
  }
  CHECK(templates.size() == 10);
  CHECK(matched + raised == 50);
  CHECK(raised >= 1);
}

TEST_CASE("chat templates: ChatTemplate renders messages, tools and the special tokens", "[chat][templates]") {
  const chat::ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if tools %}[{{ tools|map(attribute='name')|join(',') }}]{% endif %}"
      "{% if add_generation_prompt %}<assistant>{% else %}{{ eos_token }}{% endif %}");
  const j::Value msgs = j::parse_json(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}])");
  CHECK(t.render(msgs, true, j::Value::none(), "<s>", "</s>") == "<s><user>Hi<assistant>Yo<assistant>");
  CHECK(t.render(msgs, false, j::parse_json(R"([{"name": "a"}, {"name": "b"}])"), "", "</s>") ==
        "<user>Hi<assistant>Yo[a,b]</s>");
  // Extra variables (enable_thinking, documents, ...) reach the template.
  chat::ChatInput in = chat::parse_chat_input(R"({"messages": [], "enable_thinking": false, "documents": ["d"]})");
  const chat::ChatTemplate v("{{ enable_thinking }} {{ documents }} {{ tools is none }}");
  CHECK(v.render(in) == "False ['d'] True");
}

TEST_CASE("chat templates: the chat input JSON", "[chat][templates]") {
  chat::ChatInput defaults;
  defaults.bos_token = "<model-bos>";
  defaults.eos_token = "<model-eos>";
  const chat::ChatInput in = chat::parse_chat_input(
      R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": true, "eos_token": "E",
          "now": "2026-12-01T12:00:00", "tools": null, "custom": 1})",
      defaults);
  CHECK(in.messages.items().size() == 1);
  CHECK(in.add_generation_prompt);
  CHECK(in.bos_token == "<model-bos>");  // not in the JSON: the default stays
  CHECK(in.eos_token == "E");
  REQUIRE(in.now);
  CHECK(in.now->day == 1);
  CHECK(in.tools.is_none());
  REQUIRE(in.extra.size() == 1);
  CHECK(in.extra[0].first == "custom");
  auto msg = [](const std::string& text) {
    try {
      chat::parse_chat_input(text);
    } catch (const fish::Error& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  CHECK(msg("[]") == "chat input: expected a JSON object, found list");
  CHECK(msg("{}") == "chat input: \"messages\" is missing");
  CHECK(msg(R"({"messages": {}})") == "chat input: \"messages\" must be an array");
  CHECK(msg(R"({"messages": [], "add_generation_prompt": 1})") ==
        "chat input: \"add_generation_prompt\" must be true or false");
  CHECK(msg(R"({"messages": [], "now": "noon"})") ==
        "chat input: \"now\": 'noon' is not an ISO date-time (e.g. 2026-12-01T12:00:00)");
  CHECK(msg("{\"messages\": [") == "invalid JSON at line 1, column 15: unexpected end of input");
}

TEST_CASE("chat templates: a GGUF's chat template and BOS/EOS texts, and the fallback", "[chat][templates]") {
  const std::string with = tmp_path("with-template.gguf"), without = tmp_path("without-template.gguf");
  {
    fish::gguf::Writer w;
    w.set_str("general.architecture", "llama");
    w.set_str("tokenizer.ggml.model", "gpt2");
    w.set_str_array("tokenizer.ggml.tokens", {"<unk>", "<|begin|>", "<|end|>", "a"});
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_str("tokenizer.chat_template", "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}");
    w.write(with);
    w.remove("tokenizer.chat_template");
    w.write(without);
  }
  CHECK(chat::is_gguf_file(with));
  const chat::ModelChatTemplate m = chat::read_model_chat_template(with);
  REQUIRE(m.source);
  CHECK(*m.source == "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}");
  CHECK(m.bos_token == "<|begin|>");
  CHECK(m.eos_token == "<|end|>");
  const j::Value msgs = j::parse_json(R"([{"role": "user", "content": "Hi"}])");
  CHECK(chat::ChatTemplate(*m.source).render(msgs, true, j::Value::none(), m.bos_token, m.eos_token) ==
        "<|begin|>Hi<|end|>");

  const chat::ModelChatTemplate none = chat::read_model_chat_template(without);
  CHECK_FALSE(none.source);
  CHECK(none.bos_token == "<|begin|>");
  // The documented fallback: ChatML.
  const j::Value conv = j::parse_json(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])");
  CHECK(chat::ChatTemplate(chat::kFallbackTemplate).render(conv, true, j::Value::none(), "", "") ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  std::remove(with.c_str());
  std::remove(without.c_str());
  CHECK_FALSE(chat::is_gguf_file(shared_path("models/templates/README.md")));
}
