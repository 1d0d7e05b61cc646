// Pipes and pseudo-terminals for the CLI tests: see process_util.h.
#include "process_util.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace fish::test {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> v;
  for (const std::string& a : argv) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  return v;
}

int decode_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1; }

}  // namespace

ProcResult run_process(const std::vector<std::string>& argv, const std::string& input, double timeout_s) {
  int in[2], out[2], err[2];
  REQUIRE(pipe(in) == 0);
  REQUIRE(pipe(out) == 0);
  REQUIRE(pipe(err) == 0);
  std::vector<char*> args = c_argv(argv);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);  // the child may exit before reading all its input
  ProcResult r;
  size_t sent = 0;
  int fin = in[1];
  if (input.empty()) {
    close(fin);
    fin = -1;
  }
  const auto t0 = clock_type::now();
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    if (seconds_since(t0) > timeout_s) {
      kill(pid, SIGKILL);
      FAIL_CHECK("the process ran past " << timeout_s << " s: " << argv[0]);
      break;
    }
    pollfd p[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {fin, POLLOUT, 0}};
    const int n = poll(p, fin >= 0 ? 3 : 2, 100);
    if (n < 0 && errno != EINTR) break;
    char buf[65536];
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
      const ssize_t k = read(p[i].fd, buf, sizeof buf);
      if (k > 0) (i == 0 ? r.out : r.err).append(buf, size_t(k));
      else (i == 0 ? out_open : err_open) = false;
    }
    if (fin >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t k = write(fin, input.data() + sent, input.size() - sent);
      if (k > 0) sent += size_t(k);
      if (k < 0 && errno != EAGAIN) sent = input.size();
      if (sent == input.size()) {
        close(fin);
        fin = -1;
      }
    }
  }
  if (fin >= 0) close(fin);
  close(out[0]);
  close(err[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = decode_status(st);
  return r;
}

PtyProcess::PtyProcess(const std::vector<std::string>& argv) {
  std::vector<char*> args = c_argv(argv);
  winsize ws{};
  ws.ws_row = 40;
  ws.ws_col = 120;
  const pid_t pid = forkpty(&fd_, nullptr, nullptr, &ws);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execv(args[0], args.data());
    _exit(127);
  }
  pid_ = pid;
}

PtyProcess::~PtyProcess() {
  if (status_ == -2 && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) close(fd_);
}

void PtyProcess::type(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t k = write(fd_, bytes.data() + done, bytes.size() - done);
    if (k < 0 && errno == EINTR) continue;
    REQUIRE(k > 0);
    done += size_t(k);
  }
}

bool PtyProcess::pump(double timeout_s) {
  pollfd p{fd_, POLLIN, 0};
  const int n = poll(&p, 1, int(timeout_s * 1000));
  if (n <= 0) return true;
  char buf[65536];
  const ssize_t k = read(fd_, buf, sizeof buf);
  if (k <= 0) return false;  // EIO: the other side closed (the process ended)
  out_.append(buf, size_t(k));
  return true;
}

size_t PtyProcess::wait_for(const std::string& what, size_t from, double timeout_s) {
  const auto t0 = clock_type::now();
  for (;;) {
    const size_t at = out_.find(what, from);
    if (at != std::string::npos) return at;
    if (seconds_since(t0) > timeout_s || !pump(0.05)) return out_.find(what, from);
  }
}

bool PtyProcess::wait_output(size_t from, double timeout_s) {
  const auto t0 = clock_type::now();
  while (out_.size() <= from) {
    if (seconds_since(t0) > timeout_s || !pump(0.05)) return out_.size() > from;
  }
  return true;
}

int PtyProcess::wait_exit(double timeout_s) {
  const auto t0 = clock_type::now();
  for (;;) {
    int st = 0;
    const pid_t w = waitpid(pid_, &st, WNOHANG);
    if (w == pid_) {
      while (pump(0.01) && out_.size() < (size_t(64) << 20)) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) break;
      }
      status_ = decode_status(st);
      return status_;
    }
    if (seconds_since(t0) > timeout_s) return -1;
    pump(0.05);
  }
}

}  // namespace fish::test
