// The chat template C API (fish_chat.h) that the CLI, and later fish chat and
// fish serve, use: statuses, the template's own raise_exception text, plain
// message arrays, GGUF loading with and without a template, NUL bytes.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "fish/fish_chat.h"
#include "gguf/gguf_writer.h"

namespace {

struct Rendered {
  int status;
  std::string text;  // the rendering or the error message
};

Rendered render_json(const fish_chat_template* t, const std::string& json) {
  char* out = nullptr;
  size_t n = 0;
  fish_error* err = nullptr;
  const int st = fish_chat_template_render_json(t, json.data(), json.size(), &out, &n, &err);
  Rendered r{st, st == FISH_CHAT_OK ? std::string(out, n) : std::string(fish_error_message(err))};
  fish_free(out);
  fish_error_free(err);
  return r;
}

fish_chat_template* parse(const std::string& src) {
  fish_chat_template* t = nullptr;
  fish_error* err = nullptr;
  REQUIRE(fish_chat_template_parse(src.data(), src.size(), &t, &err) == FISH_CHAT_OK);
  return t;
}

}  // namespace

TEST_CASE("chat capi: render, the template's raise_exception, and errors as statuses", "[chat][capi]") {
  fish_chat_template* t = parse(
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}");
  Rendered r = render_json(t, R"({"messages": [{"role": "user", "content": "a\u0000b"}], "bos_token": "<s>"})");
  CHECK(r.status == FISH_CHAT_OK);
  CHECK(r.text == std::string("<s>[user]a\0b", 12));  // NUL bytes survive: the length is returned
  r = render_json(t, R"({"messages": [{"role": "system", "content": "x"}]})");
  CHECK(r.status == FISH_CHAT_RAISED);
  CHECK(r.text == "System role not supported");
  r = render_json(t, R"({"messages": 1})");
  CHECK(r.status == FISH_CHAT_ERROR);
  CHECK(r.text == "chat input: \"messages\" must be an array");
  CHECK(fish_chat_template_is_fallback(t) == 0);
  fish_chat_template_free(t);

  fish_chat_template* bad = nullptr;
  fish_error* err = nullptr;
  const std::string src = "{% for x in y %}";
  CHECK(fish_chat_template_parse(src.data(), src.size(), &bad, &err) == FISH_CHAT_ERROR);
  CHECK(bad == nullptr);
  CHECK(std::string(fish_error_message(err)) ==
        "template syntax error at line 1, column 17: unexpected end of template: the 'for' block from line 1 is "
        "never closed (expected 'endfor')");
  fish_error_free(err);
}

TEST_CASE("chat capi: plain message arrays and tools", "[chat][capi]") {
  fish_chat_template* t = parse(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if tools %}{{ tools|tojson }}{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}");
  const fish_chat_message msgs[] = {{"system", "S"}, {"user", "U"}};
  char* out = nullptr;
  size_t n = 0;
  fish_error* err = nullptr;
  REQUIRE(fish_chat_template_render(t, msgs, 2, 1, R"([{"name": "f"}])", &out, &n, &err) == FISH_CHAT_OK);
  CHECK(std::string(out, n) == "<system>S<user>U[{\"name\": \"f\"}]<assistant>");
  fish_free(out);
  REQUIRE(fish_chat_template_render(t, msgs, 1, 0, nullptr, &out, &n, &err) == FISH_CHAT_OK);
  CHECK(std::string(out, n) == "<system>S");
  fish_free(out);
  const fish_chat_message no_role[] = {{nullptr, "x"}};
  CHECK(fish_chat_template_render(t, no_role, 1, 0, nullptr, &out, &n, &err) == FISH_CHAT_ERROR);
  CHECK(std::string(fish_error_message(err)) == "fish_chat_template_render: message 0 has no role or content");
  fish_error_free(err);
  fish_chat_template_free(t);
}

TEST_CASE("chat capi: loading a GGUF with and without a template", "[chat][capi]") {
  const std::string path = "/tmp/fish-chatcapi-" + std::to_string(::getpid()) + ".gguf";
  fish::gguf::Writer w;
  w.set_str("general.architecture", "llama");
  w.set_str("tokenizer.ggml.model", "llama");
  w.set_str_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  w.write(path);
  fish_chat_template* t = nullptr;
  fish_error* err = nullptr;
  CHECK(fish_chat_template_load(path.c_str(), 0, &t, &err) == FISH_CHAT_NO_TEMPLATE);
  CHECK(t == nullptr);
  CHECK(std::string(fish_error_message(err)) ==
        path + ": the model has no chat template (no tokenizer.chat_template in its metadata)");
  fish_error_free(err);
  err = nullptr;
  REQUIRE(fish_chat_template_load(path.c_str(), FISH_CHAT_TEMPLATE_FALLBACK, &t, &err) == FISH_CHAT_OK);
  CHECK(fish_chat_template_is_fallback(t) == 1);
  CHECK(std::string(fish_chat_template_source(t)).find("<|im_start|>") != std::string::npos);  // ChatML's text
  CHECK(std::string(fish_chat_template_source(nullptr)).empty());
  const fish_chat_message msgs[] = {{"user", "Hi"}};
  char* out = nullptr;
  size_t n = 0;
  REQUIRE(fish_chat_template_render(t, msgs, 1, 1, nullptr, &out, &n, &err) == FISH_CHAT_OK);
  CHECK(std::string(out, n) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  fish_free(out);
  fish_chat_template_free(t);

  w.set_str("tokenizer.chat_template", "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}");
  w.write(path);
  REQUIRE(fish_chat_template_load(path.c_str(), 0, &t, &err) == FISH_CHAT_OK);
  // The text fish serve reads to tell the tool-call format: the metadata's, byte for byte.
  CHECK(std::string(fish_chat_template_source(t)) == "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}");
  REQUIRE(fish_chat_template_render(t, msgs, 1, 0, nullptr, &out, &n, &err) == FISH_CHAT_OK);
  CHECK(std::string(out, n) == "<s>Hi</s>");  // SentencePiece's default BOS 1 and EOS 2
  fish_free(out);
  fish_chat_template_free(t);
  std::remove(path.c_str());

  CHECK(fish_chat_template_load("/nonexistent/x.jinja", 0, &t, &err) == FISH_CHAT_ERROR);
  CHECK(std::string(fish_error_message(err)) == "/nonexistent/x.jinja: cannot open");
  fish_error_free(err);
}
