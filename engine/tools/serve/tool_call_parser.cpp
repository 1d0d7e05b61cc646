// Tool calls out of a streamed reply: see tool_call_parser.h.
#include "serve/tool_call_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string_view>

#include "serve/python_call.h"

namespace fish::serve {

using ojson = nlohmann::ordered_json;  // keeps the model's key order in the arguments text

namespace {

constexpr const char* kPythonTag = "<|python_tag|>";
constexpr const char* kHermesClose = "</tool_call>";
// Calls nest at most this deep (a reply is model output, bounded by the
// context, but nlohmann::json recurses per level when it copies or frees).
constexpr int kMaxCallDepth = 128;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t first_non_space(const std::string& s, size_t from = 0) {
  while (from < s.size() && is_space(s[from])) ++from;
  return from < s.size() ? from : std::string::npos;
}

void rtrim(std::string& s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
}

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// Arguments made here (not the model's JSON) may hold bytes that are no
// UTF-8 (a Python string of them): they are written as U+FFFD, not thrown on.
std::string compact(const ojson& v) { return v.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// s[from..] is a beginning (maybe all) of `word`.
bool begins(const std::string& s, size_t from, const std::string& word) {
  const size_t n = s.size() - from;
  return n <= word.size() && word.compare(0, n, s, from, n) == 0;
}

// One call out of an object: {"name": string, "arguments" (or Llama's
// "parameters"): object, or a string holding one; absent: {}}.
std::optional<ToolCall> call_of(const ojson& v, ToolFamily f) {
  if (!v.is_object()) return std::nullopt;
  auto n = v.find("name");
  if (n == v.end() || !n->is_string() || n->get<std::string>().empty()) return std::nullopt;
  ToolCall c;
  c.name = n->get<std::string>();
  auto a = v.find("arguments");
  if (f == ToolFamily::kLlama3 && a == v.end()) a = v.find("parameters");
  ojson args = ojson::object();
  if (a != v.end()) {
    if (a->is_string()) {
      args = ojson::parse(a->get<std::string>(), nullptr, false);
      if (args.is_discarded()) return std::nullopt;
    } else {
      args = *a;
    }
    if (!args.is_object()) return std::nullopt;
  }
  c.arguments = args.dump();
  if (auto id = v.find("id"); f == ToolFamily::kMistral && id != v.end() && id->is_string() && !id->get<std::string>().empty())
    c.id = id->get<std::string>();
  else
    c.id = new_tool_call_id();
  return c;
}

}  // namespace

std::string new_tool_call_id() {
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % 62];
  return id;
}

void JsonScan::reset(size_t start) {
  *this = JsonScan{};
  start_ = pos_ = start;
}

size_t JsonScan::feed(const std::string& s) {
  if (end_ != std::string::npos) return end_;
  for (; pos_ < s.size(); ++pos_) {
    const char c = s[pos_];
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      deepest_ = std::max(deepest_, ++depth_);
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) return end_ = ++pos_;
    }
  }
  return std::string::npos;
}

ToolCallParser::ToolCallParser(ToolFamily family, size_t max_calls, bool start_in_call,
                               std::vector<std::string> tool_names)
    : family_(family), open_(tool_call_open(family)), max_calls_(max_calls), tool_names_(std::move(tool_names)) {
  // llama.cpp knows the code interpreter by either name and calls raw code's
  // call "python"; fish names it after the tool the request offers.
  for (const char* n : {"python", "code_interpreter"})
    if (code_tool_.empty() && offered(n)) code_tool_ = n;
  if (family_ == ToolFamily::kNone || max_calls_ == 0) state_ = State::kPlain;
  else if (start_in_call) state_ = State::kCall;
  else if (family_ == ToolFamily::kLlama3) state_ = State::kStart;
  else state_ = State::kText;
}

std::vector<ToolEvent> ToolCallParser::push(const std::string& text) {
  std::vector<ToolEvent> out;
  buf_ += text;
  run(false, &out);
  return out;
}

std::vector<ToolEvent> ToolCallParser::finish() {
  std::vector<ToolEvent> out;
  run(true, &out);
  return out;
}

void ToolCallParser::run(bool at_end, std::vector<ToolEvent>* out) {
  for (;;) {
    const bool more = state_ == State::kCall      ? step_call(at_end, out)
                      : state_ == State::kBuiltin ? step_builtin(at_end, out)
                                                  : step_text(at_end, out);
    if (!more) return;
  }
}

bool ToolCallParser::offered(const std::string& name) const {
  return std::find(tool_names_.begin(), tool_names_.end(), name) != tool_names_.end();
}

void ToolCallParser::emit_call(ToolCall c, std::vector<ToolEvent>* out) {
  ToolEvent e;
  e.is_call = true;
  e.call = std::move(c);
  out->push_back(std::move(e));
  ++n_calls_;
}

void ToolCallParser::emit_content(std::string text, std::vector<ToolEvent>* out) {
  if (text.empty()) return;
  if (!out->empty() && !out->back().is_call) {
    out->back().content += text;
    return;
  }
  ToolEvent e;
  e.content = std::move(text);
  out->push_back(std::move(e));
}

void ToolCallParser::release_as_text(size_t n, std::vector<ToolEvent>* out) {
  std::string text = marker_seen_ + buf_.substr(0, n);
  buf_.erase(0, n);
  marker_seen_.clear();
  scan_ = JsonScan{};
  // Llama 3 calls come only at the start: whatever follows a failed one is text.
  state_ = family_ == ToolFamily::kLlama3 ? State::kPlain : State::kText;
  emit_content(std::move(text), out);
}

// kStart, kText and kPlain: returns true when the state changed (run again).
bool ToolCallParser::step_text(bool at_end, std::vector<ToolEvent>* out) {
  if (after_call_) {
    const size_t i = first_non_space(buf_);
    buf_.erase(0, i == std::string::npos ? buf_.size() : i);
    if (buf_.empty()) return false;
    after_call_ = false;
  }
  if (state_ == State::kPlain) {
    emit_content(std::move(buf_), out);
    buf_.clear();
    return false;
  }
  if (n_calls_ >= max_calls_) {
    state_ = State::kPlain;
    return true;
  }
  if (state_ == State::kStart) {  // Llama 3: is the reply a call?
    const size_t i = first_non_space(buf_);
    if (i == std::string::npos) {  // whitespace alone so far
      if (at_end) state_ = State::kPlain;
      return at_end;
    }
    const std::string tag = kPythonTag;
    if (buf_.compare(i, tag.size(), tag) == 0 || buf_[i] == '{') {
      const size_t n = buf_[i] == '{' ? i : i + tag.size();
      marker_seen_ = buf_.substr(0, n);
      buf_.erase(0, n);
      state_ = State::kCall;
      return true;
    }
    if (!at_end && begins(buf_, i, tag)) return false;  // may be the tag, cut short
    state_ = State::kPlain;
    return true;
  }
  // kText: look for the opening marker.
  if (const size_t p = buf_.find(open_); p != std::string::npos) {
    std::string before = buf_.substr(0, p);
    rtrim(before);
    // The whitespace before the marker goes with it: dropped beside a call,
    // given back with the marker when the call turns out malformed.
    marker_seen_ = buf_.substr(before.size(), p - before.size()) + open_;
    emit_content(std::move(before), out);
    buf_.erase(0, p + open_.size());
    state_ = State::kCall;
    return true;
  }
  size_t keep = 0;
  if (!at_end) {
    // The longest end that begins the marker, and the whitespace before it.
    for (size_t k = std::min(open_.size() - 1, buf_.size()); k > 0; --k)
      if (buf_.compare(buf_.size() - k, k, open_, 0, k) == 0) {
        keep = k;
        break;
      }
    while (keep < buf_.size() && is_space(buf_[buf_.size() - keep - 1])) ++keep;
  } else if (n_calls_ > 0) {
    rtrim(buf_);  // whitespace after the last call
  }
  emit_content(buf_.substr(0, buf_.size() - keep), out);
  buf_.erase(0, buf_.size() - keep);
  return false;
}

// kCall: the text after a marker. Returns true when the state changed.
bool ToolCallParser::step_call(bool at_end, std::vector<ToolEvent>* out) {
  const size_t i = first_non_space(buf_);
  if (i == std::string::npos) {
    if (at_end) release_as_text(buf_.size(), out);  // a marker and nothing after it
    return at_end;
  }
  const bool array = family_ == ToolFamily::kMistral || family_ == ToolFamily::kGranite;
  if (buf_[i] != (array ? '[' : '{')) {
    if (family_ == ToolFamily::kLlama3 && ends_with(marker_seen_, kPythonTag)) {
      state_ = State::kBuiltin;  // a built-in call or code, maybe
      return true;
    }
    release_as_text(0, out);  // not a call after all: the marker is text
    return true;
  }
  // buf_ only grows while in a call: the scan goes on where it stopped.
  if (scan_.start() != i) scan_.reset(i);
  const size_t end = scan_.feed(buf_);
  if (end == std::string::npos) {
    if (at_end) release_as_text(buf_.size(), out);  // cut off
    return at_end;
  }
  std::vector<ToolCall> calls;
  if (scan_.deepest() <= kMaxCallDepth) {  // deeper: text, never parsed
    const ojson v = ojson::parse(buf_.begin() + std::ptrdiff_t(i), buf_.begin() + std::ptrdiff_t(end), nullptr, false);
    if (array && v.is_array()) {
      for (const ojson& x : v) {
        auto c = call_of(x, family_);
        if (!c) {
          calls.clear();
          break;
        }
        calls.push_back(std::move(*c));
      }
    } else if (!array) {
      if (auto c = call_of(v, family_)) calls.push_back(std::move(*c));
    }
  }
  if (calls.empty()) {
    release_as_text(end, out);
    return true;
  }
  size_t consumed = end;
  if (family_ == ToolFamily::kHermes) {
    // The closing tag; missing at the very end of the reply (a forced call
    // ends with its object), or followed by the next call's tag, is let go.
    const std::string close = kHermesClose;
    const size_t j = first_non_space(buf_, end);
    if (j == std::string::npos) {
      if (!at_end) return false;
      consumed = buf_.size();
    } else if (buf_.compare(j, close.size(), close) == 0) {
      consumed = j + close.size();
    } else if (begins(buf_, j, close)) {
      if (!at_end) return false;
      consumed = buf_.size();
    } else if (buf_.compare(j, open_.size(), open_) != 0) {
      release_as_text(end, out);  // more text where the closing tag belongs
      return true;
    }
  }
  for (ToolCall& c : calls) {
    if (n_calls_ >= max_calls_) break;
    emit_call(std::move(c), out);
  }
  buf_.erase(0, consumed);
  marker_seen_.clear();
  scan_ = JsonScan{};
  after_call_ = true;
  state_ = family_ == ToolFamily::kLlama3 || n_calls_ >= max_calls_ ? State::kPlain : State::kText;
  return true;
}

// kBuiltin: Llama 3.1's text after <|python_tag|> that is no JSON object; it
// runs to the end of the reply. Returns true when the state changed.
bool ToolCallParser::step_builtin(bool at_end, std::vector<ToolEvent>* out) {
  const std::string_view body = std::string_view(buf_).substr(first_non_space(buf_));  // step_call saw text there
  if (!at_end) {
    // With no code tool only NAME.call(...) can be a call: anything else goes out now.
    if (code_tool_.empty() && python_call_head(body) == CallHead::kNo) {
      release_as_text(buf_.size(), out);
      return true;
    }
    return false;
  }
  ToolCall c;
  auto pc = parse_python_call(body, kMaxCallDepth);
  if (pc && (code_tool_.empty() || offered(pc->name))) {
    c.name = std::move(pc->name);
    c.arguments = compact(pc->arguments);
  } else if (!code_tool_.empty()) {
    std::string code(body);
    rtrim(code);  // the line end before <|eom_id|> is not code
    c.name = code_tool_;
    c.arguments = compact(ojson{{"code", std::move(code)}});
  } else {
    release_as_text(buf_.size(), out);
    return true;
  }
  c.id = new_tool_call_id();
  emit_call(std::move(c), out);
  buf_.clear();
  marker_seen_.clear();
  state_ = State::kPlain;
  return true;
}

}  // namespace fish::serve
