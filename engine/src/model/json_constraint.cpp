#include "model/json_constraint.h"

namespace fish {

namespace {

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

bool JsonPrefix::feed(uint8_t c) {
  const JsonPrefix keep = *this;
  if (feed_one(c)) return true;
  *this = keep;
  return false;
}

bool JsonPrefix::feed(std::string_view bytes) {
  const JsonPrefix keep = *this;
  for (const char ch : bytes)
    if (!feed_one(uint8_t(ch))) {
      *this = keep;
      return false;
    }
  return true;
}

bool JsonPrefix::scan(std::string_view bytes) {
  for (const char ch : bytes)
    if (!feed_one(uint8_t(ch))) return false;
  return true;
}

// Whitespace between tokens, counted: a run longer than kMaxSpaceRun is refused.
bool JsonPrefix::space() { return ++spaces_ <= kMaxSpaceRun; }

void JsonPrefix::value_end() { mode_ = stack_.empty() ? Mode::Done : Mode::CommaOrEnd; }

bool JsonPrefix::value_start(uint8_t c) {
  arr_open_ = false;
  switch (c) {
    case '{':
    case '[':
      if (int(stack_.size()) >= kMaxDepth) return false;
      stack_.push_back(char(c));
      mode_ = c == '{' ? Mode::KeyOrEnd : Mode::Value;
      arr_open_ = c == '[';
      return true;
    case '"':
      mode_ = Mode::String, key_ = false;
      return true;
    case '-':
      mode_ = Mode::Number, num_ = Num::Minus;
      return true;
    case 't':
    case 'f':
    case 'n':
      mode_ = Mode::Literal, lit_ = c == 't' ? "true" : c == 'f' ? "false" : "null", n_ = 1;
      return true;
    default:
      if (!is_digit(c)) return false;
      mode_ = Mode::Number, num_ = c == '0' ? Num::Zero : Num::Int;
      return true;
  }
}

bool JsonPrefix::after_number(uint8_t c) {
  value_end();  // numbers sit inside containers: the byte belongs to CommaOrEnd
  return feed_one(c);
}

bool JsonPrefix::feed_one(uint8_t c) {
  const bool ws_mode = mode_ == Mode::Start || mode_ == Mode::Value || mode_ == Mode::KeyOrEnd ||
                       mode_ == Mode::Key || mode_ == Mode::Colon || mode_ == Mode::CommaOrEnd;
  if (ws_mode) {
    if (is_space(c)) return space();
    spaces_ = 0;
  }
  switch (mode_) {
    case Mode::Start:
      if (c != '{') return false;
      stack_.push_back('{');
      mode_ = Mode::KeyOrEnd;
      return true;
    case Mode::KeyOrEnd:
    case Mode::Key:
      if (c == '"') {
        mode_ = Mode::String, key_ = true;
        return true;
      }
      if (c == '}' && mode_ == Mode::KeyOrEnd) {
        stack_.pop_back();
        value_end();
        return true;
      }
      return false;
    case Mode::Colon:
      if (c != ':') return false;
      mode_ = Mode::Value;
      return true;
    case Mode::Value:
      if (c == ']' && arr_open_) {
        stack_.pop_back();
        arr_open_ = false;
        value_end();
        return true;
      }
      return value_start(c);
    case Mode::CommaOrEnd:
      if (c == ',') {
        mode_ = stack_.back() == '{' ? Mode::Key : Mode::Value;
        return true;
      }
      if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
        stack_.pop_back();
        value_end();
        return true;
      }
      return false;
    case Mode::String:
      if (c == '"') {
        if (key_) mode_ = Mode::Colon;
        else value_end();
        return true;
      }
      if (c == '\\') mode_ = Mode::Escape;
      return c >= 0x20;
    case Mode::Escape:
      if (c == 'u') {
        mode_ = Mode::Unicode, n_ = 4;
        return true;
      }
      mode_ = Mode::String;
      return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't';
    case Mode::Unicode:
      if (!is_hex(c)) return false;
      if (--n_ == 0) mode_ = Mode::String;
      return true;
    case Mode::Number: {
      // A digit is required here; it moves the number to `next`.
      const auto digit_to = [&](Num next) {
        if (!is_digit(c)) return false;
        num_ = next;
        return true;
      };
      switch (num_) {
        case Num::Minus:
          return digit_to(c == '0' ? Num::Zero : Num::Int);
        case Num::Zero:
        case Num::Int:
          if (num_ == Num::Int && is_digit(c)) return true;
          if (c == '.') return num_ = Num::Dot, true;
          if (c == 'e' || c == 'E') return num_ = Num::E, true;
          return after_number(c);
        case Num::Dot:
          return digit_to(Num::Frac);
        case Num::Frac:
          if (is_digit(c)) return true;
          if (c == 'e' || c == 'E') return num_ = Num::E, true;
          return after_number(c);
        case Num::E:
          if (c == '+' || c == '-') return num_ = Num::ESign, true;
          return digit_to(Num::Exp);
        case Num::ESign:
          return digit_to(Num::Exp);
        case Num::Exp:
          if (is_digit(c)) return true;
          return after_number(c);
      }
      return false;
    }
    case Mode::Literal:
      if (uint8_t(lit_[n_]) != c) return false;
      if (lit_[++n_] == '\0') value_end();
      return true;
    case Mode::Done:
      return false;
  }
  return false;
}

}  // namespace fish
