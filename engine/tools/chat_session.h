// A conversation held in the KV cache (fish chat): the messages so far, and a
// turn = render the whole conversation with the chat template, keep the part
// the cache already holds (the longest common prefix of tokens: fish_seq_reuse
// on sequence 0), evaluate only the rest, then sample the reply token by
// token. Built on the C API alone.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fish/fish.h"
#include "fish/fish_chat.h"
#include "json_flags.h"

namespace fish::cli {

struct ChatTurnStats {
  int32_t prompt_tokens = 0;  // the rendered conversation, tokenized
  int32_t reused = 0;         // of those, already in the KV cache
  int32_t evaluated = 0;      // of those, evaluated this turn (prompt_tokens - reused)
  int32_t generated = 0;      // reply tokens sampled (the end-of-generation token not counted)
  double prompt_seconds = 0, gen_seconds = 0;
  bool interrupted = false;   // stop() asked for it (Ctrl-C)
  bool context_full = false;  // the reply reached the context's end
};

class ChatSession {
 public:
  // m holds sequence 0 for this session; t renders (both owned by the caller).
  // json: every reply is one JSON object (--json) or one value under a JSON
  // Schema (--json-schema), the constraint put on anew each turn; the reply
  // ends where the value is complete, whatever ignore_eos says.
  ChatSession(fish_model* m, const fish_chat_template* t, std::string system, const fish_sampler_params& sp,
              bool ignore_eos, JsonFlags json = {});
  ~ChatSession();
  ChatSession(const ChatSession&) = delete;
  ChatSession& operator=(const ChatSession&) = delete;

  // Forgets the conversation (the system prompt stays) and restarts the
  // sampler from its seed; the KV cache keeps what the next turn can reuse.
  void reset();

  // One turn: adds the user's message, evaluates what the cache lacks and
  // streams the reply's pieces through emit until an end-of-generation token,
  // n_predict tokens (<= 0: no limit), the context's end, or stop() returning
  // true (checked before each token). The reply (as far as it went) joins the
  // conversation. False with *error set when the turn could not run (the
  // template refused, the conversation does not fit the context, an
  // evaluation failed): the user's message is taken back then.
  bool reply(const std::string& user, int64_t n_predict, const std::function<void(const std::string&)>& emit,
             const std::function<bool()>& stop, ChatTurnStats* stats, std::string* error);

  size_t n_messages() const { return roles_.size(); }

 private:
  bool render(std::string* text, std::string* error) const;
  bool tokenize(const std::string& text, std::vector<int32_t>* ids, std::string* error) const;
  void new_sampler();

  fish_model* m_;
  const fish_chat_template* t_;
  fish_sampler_params sp_;
  fish_sampler* sampler_ = nullptr;
  bool ignore_eos_;
  JsonFlags json_;
  int32_t n_vocab_ = 0, n_ctx_ = 0, bos_ = -1;
  std::vector<int32_t> eog_ids_;  // --ignore-eos masks these
  std::string system_;
  std::vector<std::string> roles_, contents_;
};

}  // namespace fish::cli
