// The text of one generated reply as it may be sent: stop strings cut it (the
// stop string and everything after it never go out), and what could still
// become a stop string, or is an incomplete UTF-8 character, is held back
// until the next piece settles it.
#pragma once
#include <string>
#include <vector>

namespace fish::serve {

class TextStream {
 public:
  // Empty stop strings are ignored.
  explicit TextStream(std::vector<std::string> stops = {});

  // Adds a token's piece; returns the text that can go out now. After a stop
  // string appeared, stopped() is true and nothing more comes out.
  std::string push(const std::string& piece);
  // At the end of the reply: what was held back (nothing after a stop).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

// Bytes at the end of s that begin a UTF-8 character not complete yet (0..3).
size_t incomplete_utf8_tail(const std::string& s);

}  // namespace fish::serve
