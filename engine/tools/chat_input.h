// fish chat's input: messages read from a file descriptor (stdin), one line
// each, or several lines when
//   - a line ends in a backslash: the backslash becomes a newline and the
//     message goes on with the next line;
//   - a line is exactly """: the lines up to the next line that is exactly """
//     are one message (joined with newlines).
// On a terminal it prompts ("> ", then "... " for a continued message); in a
// pipe it writes nothing. The caller keeps SIGINT blocked and its handler
// sets *interrupted: the wait for input unblocks it atomically (ppoll), so a
// Ctrl-C at the prompt, or pending from before, drops the message being
// typed and is never lost in between.
#pragma once
#include <csignal>
#include <string>

namespace fish::cli {

class ChatInput {
 public:
  enum class Status { kMessage, kEof, kInterrupted };

  // interrupted: the flag the SIGINT handler sets (cleared when taken).
  ChatInput(int fd, bool prompts, volatile sig_atomic_t* interrupted)
      : fd_(fd), prompts_(prompts), interrupted_(interrupted) {}

  // The next message (without its final newline); kEof at the end of input
  // (a message cut short by the end still comes first), kInterrupted when a
  // signal broke the read.
  Status read_message(std::string* out);

 private:
  enum class Line { kOk, kEof, kInterrupted };
  Line read_line(std::string* line);
  void prompt(const char* text) const;

  bool wait_readable();  // false when SIGINT came
  int fd_;
  bool prompts_;
  volatile sig_atomic_t* interrupted_;
  bool eof_ = false;
  std::string buf_;  // bytes read past the last line returned
};

// Writes all of text to fd, retrying after signals (EINTR); false on an error.
bool write_all(int fd, const std::string& text);

}  // namespace fish::cli
