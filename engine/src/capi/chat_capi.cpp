// The chat template part of the C API (fish_chat.h), over engine/src/chat.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>
#include <sys/stat.h>

#include "capi/capi_util.h"
#include "chat/chat_template.h"
#include "chat/jinja_json.h"
#include "fish/fish_chat.h"

struct fish_chat_template {
  fish::chat::ChatTemplate tpl;
  fish::chat::ChatInput defaults;  // the GGUF's BOS/EOS texts
  bool fallback = false;
};

using fish::capi::set_error;
namespace chat = fish::chat;

namespace {

// Runs fn(); exceptions become a status and a message. A template's own
// raise_exception keeps its text exactly (it is meant for the user).
template <class Fn>
int chat_guarded(fish_error** err, Fn&& fn) {
  try {
    return fn();
  } catch (const chat::jinja::Error& e) {
    set_error(err, e.what());
    return e.kind() == chat::jinja::Error::Kind::Raised ? FISH_CHAT_RAISED : FISH_CHAT_ERROR;
  } catch (const std::exception& e) {
    set_error(err, e.what());
  } catch (...) {
    set_error(err, "unknown internal error");
  }
  return FISH_CHAT_ERROR;
}

std::string read_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw fish::Error(path + ": cannot open");
  if (!S_ISREG(st.st_mode)) throw fish::Error(path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  if (!in || (!(ss << in.rdbuf()) && st.st_size > 0)) throw fish::Error(path + ": cannot read");
  return ss.str();
}

// The rendering as a malloc'd, NUL-terminated copy (it may hold NUL bytes: *out_len says how long).
void give_text(const std::string& text, char** out, size_t* out_len) {
  char* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, text.data(), text.size());
  p[text.size()] = '\0';
  *out = p;
  if (out_len) *out_len = text.size();
}

}  // namespace

extern "C" {

FISH_API int fish_chat_template_load(const char* path, uint32_t flags, fish_chat_template** out, fish_error** err) {
  if (out) *out = nullptr;
  if (!path || !out) {
    set_error(err, "fish_chat_template_load: path and out are required");
    return FISH_CHAT_ERROR;
  }
  return chat_guarded(err, [&] {
    const std::string p = path;
    std::string source;
    chat::ChatInput defaults;
    bool fallback = false;
    if (chat::is_gguf_file(p)) {
      chat::ModelChatTemplate m = chat::read_model_chat_template(p);
      defaults.bos_token = m.bos_token;
      defaults.eos_token = m.eos_token;
      if (m.source) {
        source = std::move(*m.source);
      } else if (flags & FISH_CHAT_TEMPLATE_FALLBACK) {
        source = chat::kFallbackTemplate;
        fallback = true;
      } else {
        set_error(err, p + ": the model has no chat template (no tokenizer.chat_template in its metadata)");
        return FISH_CHAT_NO_TEMPLATE;
      }
    } else {
      source = read_file(p);
    }
    try {
      *out = new fish_chat_template{chat::ChatTemplate(std::move(source)), std::move(defaults), fallback};
    } catch (const chat::jinja::Error& e) {
      throw fish::Error(p + ": " + e.what());  // name the file whose template is malformed
    }
    return FISH_CHAT_OK;
  });
}

FISH_API int fish_chat_template_parse(const char* source, size_t len, fish_chat_template** out, fish_error** err) {
  if (out) *out = nullptr;
  if ((!source && len) || !out) {
    set_error(err, "fish_chat_template_parse: source and out are required");
    return FISH_CHAT_ERROR;
  }
  return chat_guarded(err, [&] {
    *out = new fish_chat_template{chat::ChatTemplate(std::string(source ? source : "", len)), {}, false};
    return FISH_CHAT_OK;
  });
}

FISH_API int fish_chat_template_render_json(const fish_chat_template* t, const char* input_json, size_t len,
                                            char** out, size_t* out_len, fish_error** err) {
  if (out) *out = nullptr;
  if (out_len) *out_len = 0;
  if (!t || (!input_json && len) || !out) {
    set_error(err, "fish_chat_template_render_json: template, input and out are required");
    return FISH_CHAT_ERROR;
  }
  return chat_guarded(err, [&] {
    const chat::ChatInput in =
        chat::parse_chat_input(std::string_view(input_json ? input_json : "", len), t->defaults);
    const std::string text = t->tpl.render(in);
    give_text(text, out, out_len);
    return FISH_CHAT_OK;
  });
}

FISH_API int fish_chat_template_render(const fish_chat_template* t, const fish_chat_message* messages, size_t n,
                                       int add_generation_prompt, const char* tools_json, char** out,
                                       size_t* out_len, fish_error** err) {
  if (out) *out = nullptr;
  if (out_len) *out_len = 0;
  if (!t || (!messages && n) || !out) {
    set_error(err, "fish_chat_template_render: template, messages and out are required");
    return FISH_CHAT_ERROR;
  }
  return chat_guarded(err, [&] {
    namespace j = chat::jinja;
    std::vector<j::Value> msgs;
    msgs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (!messages[i].role || !messages[i].content)
        throw fish::Error("fish_chat_template_render: message " + std::to_string(i) + " has no role or content");
      j::DictData d;
      d.entries.emplace_back(j::Value("role"), j::Value(messages[i].role));
      d.entries.emplace_back(j::Value("content"), j::Value(messages[i].content));
      msgs.push_back(j::Value::dict(std::move(d)));
    }
    chat::ChatInput in = t->defaults;
    in.messages = j::Value::list(std::move(msgs));
    in.add_generation_prompt = add_generation_prompt != 0;
    if (tools_json) in.tools = j::parse_json(tools_json);
    const std::string text = t->tpl.render(in);
    give_text(text, out, out_len);
    return FISH_CHAT_OK;
  });
}

FISH_API int fish_chat_template_is_fallback(const fish_chat_template* t) { return t && t->fallback ? 1 : 0; }

FISH_API const char* fish_chat_template_source(const fish_chat_template* t) {
  return t ? t->tpl.source().c_str() : "";
}

FISH_API void fish_chat_template_free(fish_chat_template* t) { delete t; }

}  // extern "C"
