// Chat templates: turning a conversation into the prompt text a model was
// trained on, by rendering the model's `tokenizer.chat_template` (a Jinja
// template) the way Hugging Face's apply_chat_template does.
//
// This is the API `fish template`, `fish chat` and `fish serve` share:
//   ChatTemplate t(source);                 // parse once (syntax errors here)
//   std::string prompt = t.render(input);   // per conversation
// Errors are jinja::Error: kind() == Raised when the template itself refused
// the conversation with raise_exception(msg) (what() is msg, for the user),
// Syntax / Runtime with a line and column otherwise.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_error.h"
#include "chat/jinja_strftime.h"
#include "chat/jinja_value.h"

namespace fish::chat {

namespace jinja {
struct Template;
}

// One conversation and the variables templates read.
struct ChatInput {
  jinja::Value messages = jinja::Value::list({});  // [{"role": ..., "content": ...}, ...]
  bool add_generation_prompt = false;
  jinja::Value tools = jinja::Value::none();  // a list of tool schemas; None when there are none
  std::string bos_token, eos_token;
  std::vector<std::pair<std::string, jinja::Value>> extra;  // more variables (enable_thinking, documents, ...)
  std::optional<jinja::DateTime> now;    // what strftime_now formats; unset: the local clock
};

// Reads the JSON input of `fish template`: an object with "messages" (required),
// "add_generation_prompt", "tools", "bos_token", "eos_token", "now" (an ISO date
// and time) and any other key as one more template variable. Fields the JSON
// does not give keep their value in `defaults` (e.g. a GGUF's BOS/EOS texts).
// Throws fish::Error.
ChatInput parse_chat_input(std::string_view json, ChatInput defaults = {});

class ChatTemplate {
 public:
  // Parses the template; throws jinja::Error (Syntax) with line and column.
  explicit ChatTemplate(std::string source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  std::string render(const ChatInput& input) const;
  std::string render(const jinja::Value& messages, bool add_generation_prompt, const jinja::Value& tools,
                     const std::string& bos_token, const std::string& eos_token) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::unique_ptr<jinja::Template> tpl_;
};

// What a GGUF says about chat formatting.
struct ModelChatTemplate {
  std::optional<std::string> source;  // tokenizer.chat_template; nullopt when the file has none
  std::string bos_token, eos_token;   // texts of the BOS / EOS tokens ("" when the file has none)
};

// Reads tokenizer.chat_template and the BOS/EOS token texts from a GGUF's
// metadata (no tensors are read). Throws fish::Error naming the file.
ModelChatTemplate read_model_chat_template(const std::string& gguf_path);

// True when the file starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

// The documented fallback for a model without a template: ChatML
// (<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n), the
// format llama.cpp also falls back to.
extern const char* const kFallbackTemplate;

}  // namespace fish::chat
