// fish chat's conversation in the KV cache: see chat_session.h.
#include "chat_session.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "cli_model.h"

namespace fish::cli {

ChatSession::ChatSession(fish_model* m, const fish_chat_template* t, std::string system,
                         const fish_sampler_params& sp, bool ignore_eos, JsonFlags json)
    : m_(m), t_(t), sp_(sp), ignore_eos_(ignore_eos && !json.on()), json_(std::move(json)), system_(std::move(system)) {
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m_, &info);
  n_vocab_ = info.n_vocab;
  n_ctx_ = info.n_ctx;
  bos_ = info.bos;
  if (ignore_eos_)
    for (int32_t v = 0; v < n_vocab_; ++v)
      if (fish_token_is_eog(m_, v)) eog_ids_.push_back(v);
  new_sampler();
}

ChatSession::~ChatSession() { fish_sampler_free(sampler_); }

void ChatSession::new_sampler() {
  fish_sampler_free(sampler_);
  sampler_ = fish_sampler_new(&sp_);  // the caller checked sp with fish_sampler_params_check
}

void ChatSession::reset() {
  roles_.clear();
  contents_.clear();
  new_sampler();
}

bool ChatSession::render(std::string* text, std::string* error) const {
  std::vector<fish_chat_message> msgs;
  if (!system_.empty()) msgs.push_back({"system", system_.c_str()});
  for (size_t i = 0; i < roles_.size(); ++i) msgs.push_back({roles_[i].c_str(), contents_[i].c_str()});
  char* out = nullptr;
  size_t n = 0;
  fish_error* err = nullptr;
  const int st = fish_chat_template_render(t_, msgs.data(), msgs.size(), 1, nullptr, &out, &n, &err);
  if (st != FISH_CHAT_OK) {
    *error = st == FISH_CHAT_RAISED ? std::string("the chat template refused the conversation: ") + fish_error_message(err)
                                    : std::string("the chat template failed: ") + fish_error_message(err);
    fish_error_free(err);
    return false;
  }
  text->assign(out, n);
  fish_free(out);
  return true;
}

bool ChatSession::tokenize(const std::string& text, std::vector<int32_t>* ids, std::string* error) const {
  // Special tokens written in the template's text (<|im_start|>, <|eot_id|>)
  // are those tokens; BOS is added as the model asks, once: a template that
  // writes bos_token itself must not get a second one.
  ids->assign(text.size() + 16, 0);
  int32_t n = fish_tokenize(m_, text.data(), text.size(), 1, 1, ids->data(), int32_t(ids->size()));
  if (n < 0 && n != -INT32_MAX) {
    ids->assign(size_t(-n), 0);
    n = fish_tokenize(m_, text.data(), text.size(), 1, 1, ids->data(), int32_t(ids->size()));
  }
  if (n < 0) {
    *error = std::string("tokenize failed: ") + fish_last_error(m_);
    return false;
  }
  ids->resize(size_t(n));
  if (ids->size() >= 2 && bos_ >= 0 && (*ids)[0] == bos_ && (*ids)[1] == bos_) ids->erase(ids->begin());
  return true;
}

bool ChatSession::reply(const std::string& user, int64_t n_predict,
                        const std::function<void(const std::string&)>& emit, const std::function<bool()>& stop,
                        ChatTurnStats* stats, std::string* error) {
  using clock = std::chrono::steady_clock;
  ChatTurnStats st;
  roles_.push_back("user");
  contents_.push_back(user);
  auto take_back = [&] {
    roles_.pop_back();
    contents_.pop_back();
    *stats = st;
    return false;
  };
  std::string text;
  std::vector<int32_t> ids;
  if (!render(&text, error) || !tokenize(text, &ids, error)) return take_back();
  st.prompt_tokens = int32_t(ids.size());
  if (ids.empty()) {
    *error = "the chat template rendered nothing to evaluate";
    return take_back();
  }
  if (st.prompt_tokens >= n_ctx_) {
    *error = "the conversation (" + std::to_string(ids.size()) + " tokens) does not fit the context (" +
             std::to_string(n_ctx_) + "): /reset starts a new one, -c sets a larger context";
    return take_back();
  }
  // What the cache already holds of this rendering stays; the rest is new.
  const int32_t reused = fish_seq_reuse(m_, 0, ids.data(), st.prompt_tokens);
  if (reused < 0) {
    *error = std::string("fish_seq_reuse: ") + fish_last_error(m_);
    return take_back();
  }
  st.reused = reused;
  st.evaluated = st.prompt_tokens - reused;
  const auto t0 = clock::now();
  if (fish_eval(m_, ids.data() + reused, st.evaluated, reused, 0) != 0) {
    *error = std::string("evaluation failed: ") + fish_last_error(m_);
    return take_back();
  }
  for (int32_t i = reused; i < st.prompt_tokens; ++i) fish_sampler_accept(sampler_, ids[size_t(i)]);
  if (!json_.apply(sampler_, m_, error)) return take_back();  // each reply one value: the constraint starts afresh
  const auto t1 = clock::now();
  st.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();

  std::vector<float> masked;  // --ignore-eos: the logits with every end-of-generation token at -inf
  std::string answer;
  int32_t pos = st.prompt_tokens;
  bool ok = true;
  for (;;) {
    if (stop()) {
      st.interrupted = true;
      break;
    }
    const float* logits = fish_get_logits(m_, -1);
    if (ignore_eos_) {
      masked.assign(logits, logits + n_vocab_);
      for (int32_t v : eog_ids_) masked[size_t(v)] = -std::numeric_limits<float>::infinity();
      logits = masked.data();
    }
    const int32_t tok = fish_sampler_sample(sampler_, logits, n_vocab_);
    if (tok < 0 || (!ignore_eos_ && fish_token_is_eog(m_, tok))) break;
    fish_sampler_accept(sampler_, tok);
    const std::string p = piece(m_, tok);
    answer += p;
    emit(p);
    ++st.generated;
    if (n_predict > 0 && st.generated >= n_predict) break;
    if (pos >= n_ctx_) {
      st.context_full = true;
      break;
    }
    if (fish_eval(m_, &tok, 1, pos, 0) != 0) {
      *error = std::string("evaluation failed: ") + fish_last_error(m_);
      ok = false;
      break;
    }
    ++pos;
  }
  st.gen_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  roles_.push_back("assistant");
  contents_.push_back(answer);
  *stats = st;
  return ok;
}

}  // namespace fish::cli
