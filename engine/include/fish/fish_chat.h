/* libfish public C API: chat templates (`fish template`, and later `fish chat`
 * and `fish serve`).
 *
 * A chat template is the Jinja template a model carries in its GGUF metadata
 * (tokenizer.chat_template) that turns a conversation into the prompt text the
 * model was trained on. libfish renders it as Hugging Face's
 * apply_chat_template does (jinja2 with trim_blocks and lstrip_blocks, the
 * loopcontrols extension, tojson as Python's json.dumps, raise_exception and
 * strftime_now), byte for byte.
 *
 * A model without a template: fish_chat_template_load reports
 * FISH_CHAT_NO_TEMPLATE, unless FISH_CHAT_TEMPLATE_FALLBACK asks for the
 * fallback, ChatML ("<|im_start|>role\ncontent<|im_end|>\n" per message, then
 * "<|im_start|>assistant\n" for the generation prompt). */
#ifndef FISH_FISH_CHAT_H
#define FISH_FISH_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "fish/fish.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fish_chat_template fish_chat_template;

/* Status of the chat template calls. */
#define FISH_CHAT_OK 0
#define FISH_CHAT_RAISED 1      /* the template refused the conversation (raise_exception): the
                                 * error's message is the template's own text, nothing added */
#define FISH_CHAT_ERROR 2       /* a malformed template (with line and column), bad input JSON,
                                 * an unreadable file, or an error while rendering */
#define FISH_CHAT_NO_TEMPLATE 3 /* a GGUF without tokenizer.chat_template */

/* Flags of fish_chat_template_load. */
#define FISH_CHAT_TEMPLATE_FALLBACK 1u /* a GGUF without a template gets ChatML */

/* Loads a template from a GGUF (recognised by its magic: the template and the
 * BOS/EOS token texts come from its metadata) or from a text file (the
 * template itself). Returns a FISH_CHAT_* status; on success *out is set
 * (free with fish_chat_template_free), else *err (free with fish_error_free). */
FISH_API int fish_chat_template_load(const char* path, uint32_t flags, fish_chat_template** out, fish_error** err);

/* Parses a template from its text (len bytes). */
FISH_API int fish_chat_template_parse(const char* source, size_t len, fish_chat_template** out, fish_error** err);

/* Renders one conversation. input_json (len bytes) is an object:
 *   {"messages": [{"role": "user", "content": "Hi"}, ...],
 *    "add_generation_prompt": true, "tools": [...], "bos_token": "<s>",
 *    "eos_token": "</s>", "now": "2026-12-01T12:00:00", ...}
 * "messages" is required; "tools" is optional; bos_token / eos_token default
 * to the GGUF's token texts ("" for a text template); "now" (an ISO date-time)
 * fixes what strftime_now formats (default: the local clock); any other key is
 * one more template variable (enable_thinking, documents, ...).
 * On FISH_CHAT_OK, *out holds the rendering (*out_len bytes, NUL-terminated,
 * malloc'd: free with fish_free). */
FISH_API int fish_chat_template_render_json(const fish_chat_template* t, const char* input_json, size_t len,
                                            char** out, size_t* out_len, fish_error** err);

/* One message of a conversation (UTF-8, NUL-terminated). */
typedef struct fish_chat_message {
  const char* role;     /* "system", "user", "assistant", "tool", ... */
  const char* content;
} fish_chat_message;

/* Renders a conversation of plain messages (what `fish chat` keeps): the same
 * as fish_chat_template_render_json with {"messages": [...],
 * "add_generation_prompt": ..., "tools": <tools_json>} where tools_json is a
 * JSON array or NULL for none; BOS/EOS are the GGUF's. */
FISH_API int fish_chat_template_render(const fish_chat_template* t, const fish_chat_message* messages, size_t n,
                                       int add_generation_prompt, const char* tools_json, char** out,
                                       size_t* out_len, fish_error** err);

/* 1 when the template is the ChatML fallback (the model had none), else 0. */
FISH_API int fish_chat_template_is_fallback(const fish_chat_template* t);

/* The template's Jinja text (NUL-terminated, owned by t; "" for NULL): what
 * fish serve reads to tell which tool-call format the model was taught. */
FISH_API const char* fish_chat_template_source(const fish_chat_template* t);

FISH_API void fish_chat_template_free(fish_chat_template* t);

#ifdef __cplusplus
}
#endif

#endif
