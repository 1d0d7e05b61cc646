#include "backend/child_process.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#if !defined(_WIN32)
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace fish::backend {

namespace {

int g_stage_fd = -1;  // the child's end of the report pipe; -1 outside a child

// The child's report: "S <stage>\n" before each stage, "D\n" when body returned.
void write_all(int fd, const std::string& s) {
#if !defined(_WIN32)
  size_t at = 0;
  while (at < s.size()) {
    const ssize_t n = ::write(fd, s.data() + at, s.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    at += size_t(n);
  }
#else
  (void)fd;
  (void)s;
#endif
}

// Printable, one line, at most 200 characters.
std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 200) {
      out += "...";
      break;
    }
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  }
  return out;
}

}  // namespace

std::string signal_text(int sig) {
#if !defined(_WIN32)
  switch (sig) {
    case SIGSEGV: return "SIGSEGV, segmentation fault";
    case SIGBUS: return "SIGBUS, bus error";
    case SIGABRT: return "SIGABRT, aborted";
    case SIGILL: return "SIGILL, illegal instruction";
    case SIGFPE: return "SIGFPE, arithmetic exception";
    case SIGKILL: return "SIGKILL, killed";
    case SIGTERM: return "SIGTERM, terminated";
    case SIGTRAP: return "SIGTRAP, trap";
    case SIGSYS: return "SIGSYS, bad system call";
    case SIGPIPE: return "SIGPIPE, broken pipe";
    default: break;
  }
#endif
  return "signal " + std::to_string(sig);
}

std::string ChildOutcome::describe() const {
  if (completed) return "";
  std::string s = what + (stage.empty() ? " before its first stage" : " in " + stage);
  if (!last_words.empty()) s += "; its last words on stderr: '" + last_words + "'";
  return s;
}

void child_stage(const std::string& stage) {
  if (g_stage_fd >= 0) write_all(g_stage_fd, "S " + stage + "\n");
}

#if defined(_WIN32)

ChildOutcome run_in_child(const std::function<void()>&, double) { return ChildOutcome{}; }

#else

namespace {

[[noreturn]] void child_main(const std::function<void()>& body, int report_fd, int err_fd, pid_t parent) {
  // Crashes end the child with their signal (not a handler of the parent's),
  // without a core file; nothing the parent blocked stays blocked.
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGPIPE, SIGTERM, SIGINT})
    ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
#if defined(__linux__)
  // A parent that dies (Ctrl-C, a kill) takes a hung child with it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // it died before the line above
#else
  (void)parent;
#endif
  const int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    dup2(null_fd, 1);
  }
  dup2(err_fd, 2);
  g_stage_fd = report_fd;
  try {
    body();
  } catch (...) {
    // An exception is the in-process code's to report; the child only checks survival.
  }
  write_all(report_fd, "D\n");
  _exit(0);
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Reads what is there now; false at EOF or error.
bool drain(int fd, std::string& into, size_t keep_last) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, size_t(n));
      if (keep_last && into.size() > 2 * keep_last) into.erase(0, into.size() - keep_last);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

bool make_pipe(int fds[2]) {
#if defined(__linux__)
  return pipe2(fds, O_CLOEXEC) == 0;
#else
  if (pipe(fds) != 0) return false;
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  return true;
#endif
}

}  // namespace

ChildOutcome run_in_child(const std::function<void()>& body, double timeout_s) {
  using clock = std::chrono::steady_clock;
  ChildOutcome out;
  int rep[2], err[2];
  if (!make_pipe(rep)) {
    out.what = std::string("could not be isolated (pipe: ") + std::strerror(errno) + ")";
    return out;
  }
  if (!make_pipe(err)) {
    out.what = std::string("could not be isolated (pipe: ") + std::strerror(errno) + ")";
    ::close(rep[0]);
    ::close(rep[1]);
    return out;
  }
  // Whatever the parent has buffered must not be written a second time by a
  // child that calls exit().
  std::fflush(nullptr);
  const auto t0 = clock::now();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    ::close(rep[0]);
    ::close(err[0]);
    child_main(body, rep[1], err[1], parent);
  }
  ::close(rep[1]);
  ::close(err[1]);
  if (pid < 0) {
    out.what = std::string("could not be isolated (fork: ") + std::strerror(errno) + ")";
    ::close(rep[0]);
    ::close(err[0]);
    return out;
  }
  out.isolated = true;
  set_nonblocking(rep[0]);
  set_nonblocking(err[0]);
  std::string report, errors;
  bool rep_open = true, err_open = true, exited = false, timed_out = false;
  int status = 0;
  const auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  while (!exited) {
    // A pipe at EOF is left out (a negative fd), or poll would return at once.
    pollfd fds[2] = {{rep_open ? rep[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    // Short waits: the child's exit is noticed by waitpid, not by EOF (a
    // grandchild it started may hold the pipes open).
    ::poll(fds, 2, 20);
    if (rep_open) rep_open = drain(rep[0], report, 0);
    if (err_open) err_open = drain(err[0], errors, 4096);
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno == ECHILD)) {
      exited = w == pid;
      break;
    }
    if (clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      timed_out = true;
      break;
    }
  }
  drain(rep[0], report, 0);
  drain(err[0], errors, 4096);
  ::close(rep[0]);
  ::close(err[0]);
  out.seconds = std::chrono::duration<double>(clock::now() - t0).count();

  bool done = false;
  for (size_t at = 0; at < report.size();) {
    const size_t nl = report.find('\n', at);
    if (nl == std::string::npos) break;
    const std::string line = report.substr(at, nl - at);
    if (line.rfind("S ", 0) == 0) out.stage = line.substr(2);
    else if (line == "D") done = true;
    at = nl + 1;
  }
  // The last non-empty line of stderr.
  size_t end = errors.find_last_not_of(" \t\r\n");
  if (end != std::string::npos) {
    const size_t begin = errors.find_last_of('\n', end);
    out.last_words = one_line(errors.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1)));
  }

  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", timeout_s);
  if (timed_out) {
    out.what = std::string("did not finish within ") + secs + " s (killed)";
  } else if (!exited) {
    // SIGCHLD is ignored in this process: no exit status, only the report.
    out.completed = done;
    if (!done) out.what = "ended without finishing (exit status unknown)";
  } else if (WIFSIGNALED(status)) {
    out.what = "crashed (" + signal_text(WTERMSIG(status)) + ")";
    if (WTERMSIG(status) == SIGABRT) out.what = "aborted (SIGABRT)";
  } else if (WIFEXITED(status) && (!done || WEXITSTATUS(status) != 0)) {
    out.what = "exited with status " + std::to_string(WEXITSTATUS(status));
  } else {
    out.completed = true;
  }
  if (out.completed) out.last_words.clear();
  return out;
}

#endif

}  // namespace fish::backend
