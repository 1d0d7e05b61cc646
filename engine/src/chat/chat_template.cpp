// ChatTemplate and the GGUF / JSON inputs around it (see chat_template.h).
#include "chat/chat_template.h"

#include <sys/stat.h>

#include <fstream>

#include "chat/jinja_ast.h"
#include "chat/jinja_json.h"
#include "chat/jinja_parser.h"
#include "chat/jinja_render.h"
#include "common/error.h"
#include "gguf/gguf_file.h"

namespace fish::chat {

// ChatML, with the system message first when there is one.
const char* const kFallbackTemplate =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

ChatInput parse_chat_input(std::string_view json, ChatInput defaults) {
  const jinja::Value root = jinja::parse_json(json);
  if (!root.is_dict()) throw fish::Error("chat input: expected a JSON object, found " + root.type_name());
  ChatInput in = std::move(defaults);
  bool have_messages = false;
  for (const auto& [k, v] : root.dict().entries) {
    const std::string& key = k.get_string();
    if (key == "messages") {
      if (!v.is_list()) throw fish::Error("chat input: \"messages\" must be an array");
      in.messages = v;
      have_messages = true;
    } else if (key == "add_generation_prompt") {
      if (!v.is_bool()) throw fish::Error("chat input: \"add_generation_prompt\" must be true or false");
      in.add_generation_prompt = v.get_bool();
    } else if (key == "tools") {
      in.tools = v;  // null stays None: templates test `tools is not none`
    } else if (key == "bos_token" || key == "eos_token") {
      if (!v.is_string()) throw fish::Error("chat input: \"" + key + "\" must be a string");
      (key == "bos_token" ? in.bos_token : in.eos_token) = v.get_string();
    } else if (key == "now") {
      if (!v.is_string()) throw fish::Error("chat input: \"now\" must be an ISO date-time string");
      in.now = jinja::parse_iso_datetime(v.get_string());
      if (!in.now)
        throw fish::Error("chat input: \"now\": '" + v.get_string() +
                          "' is not an ISO date-time (e.g. 2026-12-01T12:00:00)");
    } else {
      in.extra.emplace_back(key, v);
    }
  }
  if (!have_messages) throw fish::Error("chat input: \"messages\" is missing");
  return in;
}

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), tpl_(std::make_unique<jinja::Template>(jinja::parse(source_))) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const ChatInput& in) const {
  jinja::RenderContext ctx;
  // What apply_chat_template passes: messages, tools and documents (None when
  // not given, so `tools is defined` is true as it is under transformers),
  // add_generation_prompt and the special tokens, then the extra variables
  // (which may override documents).
  ctx.vars.emplace_back("messages", in.messages);
  ctx.vars.emplace_back("tools", in.tools.is_undefined() ? jinja::Value::none() : in.tools);
  ctx.vars.emplace_back("documents", jinja::Value::none());
  ctx.vars.emplace_back("add_generation_prompt", jinja::Value(in.add_generation_prompt));
  ctx.vars.emplace_back("bos_token", jinja::Value(in.bos_token));
  ctx.vars.emplace_back("eos_token", jinja::Value(in.eos_token));
  for (const auto& kv : in.extra) ctx.vars.push_back(kv);
  ctx.now = in.now;
  return jinja::render(*tpl_, ctx);
}

std::string ChatTemplate::render(const jinja::Value& messages, bool add_generation_prompt, const jinja::Value& tools,
                                 const std::string& bos_token, const std::string& eos_token) const {
  ChatInput in;
  in.messages = messages;
  in.add_generation_prompt = add_generation_prompt;
  in.tools = tools;
  in.bos_token = bos_token;
  in.eos_token = eos_token;
  return render(in);
}

bool is_gguf_file(const std::string& path) {
  // Only a regular file is opened: opening a FIFO would wait for a writer.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

ModelChatTemplate read_model_chat_template(const std::string& gguf_path) {
  const auto file = gguf::File::open(gguf_path);
  ModelChatTemplate m;
  if (const gguf::Value* v = file->find("tokenizer.chat_template")) {
    if (v->type != gguf::ValueType::STRING)
      throw fish::Error(gguf_path + ": metadata 'tokenizer.chat_template': expected a string, found " +
                        gguf::value_type_name(v->type));
    m.source = std::string(v->str);
  }
  // Token texts by id, with SentencePiece's defaults (BOS 1, EOS 2) as the tokenizer uses them.
  const gguf::Array* tokens = file->get_arr("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != gguf::ValueType::STRING) return m;
  const auto model = file->get_str("tokenizer.ggml.model");
  const bool spm = model && *model == "llama";
  auto text_of = [&](const char* key, int64_t fallback) -> std::string {
    int64_t id = fallback;
    if (const gguf::Value* v = file->find(key)) {
      if (!v->is_integer()) return "";
      id = v->i;
      if (v->type == gguf::ValueType::UINT64 && v->u > uint64_t(INT64_MAX)) return "";
    }
    if (id < 0 || uint64_t(id) >= tokens->size) return "";
    return std::string(tokens->string(uint64_t(id)));
  };
  m.bos_token = text_of("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  m.eos_token = text_of("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  return m;
}

}  // namespace fish::chat
