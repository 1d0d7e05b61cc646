// Driving a command-line program from a test: through pipes (stdin given,
// stdout and stderr captured apart), or on a pseudo-terminal (forkpty) where
// the test types and reads what a person would see.
#pragma once
#include <string>
#include <vector>

namespace fish::test {

struct ProcResult {
  std::string out, err;
  int status = -1;  // exit status; 128 + the signal when killed by one
};

// Runs argv[0] (a path) with stdin fed from `input` (then closed); fails the
// test after timeout_s and kills the process.
ProcResult run_process(const std::vector<std::string>& argv, const std::string& input, double timeout_s = 60);

class PtyProcess {
 public:
  // Starts argv on a new pseudo-terminal (stdin, stdout and stderr are it).
  explicit PtyProcess(const std::vector<std::string>& argv);
  ~PtyProcess();  // kills the process if it still runs
  PtyProcess(const PtyProcess&) = delete;
  PtyProcess& operator=(const PtyProcess&) = delete;

  // Types bytes (a line needs its "\n"; "\x03" is Ctrl-C, "\x04" Ctrl-D at a line's start).
  void type(const std::string& bytes);
  // Reads until `what` appears in the output after `from` (an offset into
  // output()); returns its offset, or npos after timeout_s.
  size_t wait_for(const std::string& what, size_t from = 0, double timeout_s = 30);
  // Reads until some output arrives past `from`; false after timeout_s.
  bool wait_output(size_t from, double timeout_s = 30);
  // Waits for the process to end (reading its output meanwhile); its exit
  // status, or -1 after timeout_s.
  int wait_exit(double timeout_s = 30);
  const std::string& output() const { return out_; }

 private:
  bool pump(double timeout_s);  // reads what is there (waiting up to timeout_s); false at EOF
  int fd_ = -1;
  int pid_ = -1;
  int status_ = -2;
  std::string out_;
};

}  // namespace fish::test
