// fish chat's input: see chat_input.h.
#include "chat_input.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace fish::cli {

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

void ChatInput::prompt(const char* text) const {
  if (prompts_) write_all(STDOUT_FILENO, text);
}

bool ChatInput::wait_readable() {
  sigset_t during;
  sigprocmask(SIG_SETMASK, nullptr, &during);
  sigdelset(&during, SIGINT);
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    if (ppoll(&p, 1, nullptr, &during) >= 0 || errno != EINTR) return true;  // an error: read() tells
    if (*interrupted_) {
      *interrupted_ = 0;
      return false;
    }
  }
}

ChatInput::Line ChatInput::read_line(std::string* line) {
  for (;;) {
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      line->assign(buf_, 0, nl);
      buf_.erase(0, nl + 1);
      if (!line->empty() && line->back() == '\r') line->pop_back();  // CRLF input
      return Line::kOk;
    }
    if (eof_) {
      if (buf_.empty()) return Line::kEof;
      line->swap(buf_);  // a last line without its newline
      buf_.clear();
      return Line::kOk;
    }
    char chunk[4096];
    ssize_t n = -1;
    errno = EINTR;
    if (wait_readable()) {
      do n = ::read(fd_, chunk, sizeof chunk);
      while (n < 0 && errno == EINTR);
    }
    if (n < 0 && errno == EINTR) {
      buf_.clear();  // the terminal drops the line being typed as well
      return Line::kInterrupted;
    }
    if (n <= 0) {
      eof_ = true;  // an error reads as the end of input
      continue;
    }
    buf_.append(chunk, size_t(n));
  }
}

ChatInput::Status ChatInput::read_message(std::string* out) {
  out->clear();
  std::string line;
  prompt("> ");
  Line r = read_line(&line);
  if (r == Line::kEof) return Status::kEof;
  if (r == Line::kInterrupted) return Status::kInterrupted;
  if (line == "\"\"\"") {
    bool first = true;
    for (;;) {
      prompt("... ");
      r = read_line(&line);
      if (r == Line::kInterrupted) return Status::kInterrupted;
      if (r == Line::kEof || line == "\"\"\"") return Status::kMessage;  // an unclosed block ends with the input
      if (!first) *out += '\n';
      *out += line;
      first = false;
    }
  }
  while (!line.empty() && line.back() == '\\') {
    line.back() = '\n';
    *out += line;
    prompt("... ");
    r = read_line(&line);
    if (r == Line::kInterrupted) return Status::kInterrupted;
    if (r == Line::kEof) {
      out->pop_back();  // the continuation never came: no trailing newline
      return Status::kMessage;
    }
  }
  *out += line;
  return Status::kMessage;
}

}  // namespace fish::cli
