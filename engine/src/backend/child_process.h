// Runs a piece of untrusted code (a plugin's constructors, query, probe and
// device open) in a short-lived child process first, so that a crash, an
// abort, an exit() or a hang there costs the engine that plugin, not the run.
//
// The child is a fork() without exec: no helper executable to find or install,
// and the code runs exactly as it would in the engine. glibc makes the
// allocator and the dynamic loader usable in the child of a threaded parent;
// the engine's own services switch to child mode (host_services.h:
// enter_child_mode) so nothing waits on a lock or a thread of the parent. In
// the child, stdin and stdout are /dev/null, stderr goes to a pipe (its last
// line is kept for the message), crash signals have their default action and
// no core file is written. The child ends with _exit: nothing of the parent's
// is flushed or destroyed twice.
#pragma once
#include <functional>
#include <string>

namespace fish::backend {

struct ChildOutcome {
  bool isolated = false;   // a child ran (false: this platform cannot fork; body was not run)
  bool completed = false;  // body returned in the child and the child exited normally
  std::string stage;       // the last stage the child entered ("" none), e.g. "fish_plugin_query"
  std::string what;        // when not completed: "crashed (SIGSEGV, segmentation fault)",
                           // "exited with status 0", "did not finish within 10 s (killed)"
  std::string last_words;  // the last non-empty line the child wrote to stderr ("" none)
  double seconds = 0;      // how long the child ran
  // One line: "crashed (SIGSEGV, segmentation fault) in fish_plugin_query; its last
  // words on stderr: '...'" (empty when completed).
  std::string describe() const;
};

// Runs body() in a child process and waits at most timeout_s for it (then
// SIGKILL). body reports what it is about to do with child_stage().
ChildOutcome run_in_child(const std::function<void()>& body, double timeout_s);

// Inside body: the stage about to run (a crash or hang is reported "in" it).
// Does nothing outside a child.
void child_stage(const std::string& stage);

// "SIGSEGV, segmentation fault" (or "signal N").
std::string signal_text(int sig);

}  // namespace fish::backend
