// Progress of a long command on stderr: on a terminal one line redrawn in place
// ("fish bench: [#######.....]  58% synthesising"), in a pipe or a log plain
// lines (when a phase starts, then every 10%), so a newcomer sees what the
// minutes go to either way. stdout (the results) is never touched.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace fish::cli {

class Progress {
 public:
  // show_after_s > 0: a phase is shown only once it has run that long (a
  // model load's quick steps stay silent), and its "done" line only then.
  explicit Progress(std::string cmd, double show_after_s = 0)
      : cmd_(std::move(cmd)), tty_(isatty(STDERR_FILENO) == 1), show_after_s_(show_after_s) {}
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // phase: what runs now; fraction in [0, 1] (< 0: not known).
  void update(const std::string& phase, double fraction) {
    const int pct = fraction < 0 ? -1 : int(fraction * 100.0 + 1e-9);
    if (phase != phase_) {
      finish();
      phase_ = phase;
      started_ = clock::now();
      last_pct_ = -2;
      drawn_ = false;
    }
    if (pct == last_pct_) return;
    if (show_after_s_ > 0 && !drawn_ && std::chrono::duration<double>(clock::now() - started_).count() < show_after_s_)
      return;
    if (tty_) {
      char bar[21];
      const int fill = pct < 0 ? 0 : pct / 5;
      for (int i = 0; i < 20; ++i) bar[i] = i < fill ? '#' : '.';
      bar[20] = 0;
      if (pct < 0) std::fprintf(stderr, "\r%s: %s        ", cmd_.c_str(), phase_.c_str());
      else std::fprintf(stderr, "\r%s: [%s] %3d%% %s   ", cmd_.c_str(), bar, pct, phase_.c_str());
      drawn_ = true;
    } else if (!drawn_ || last_pct_ == -2 || (pct >= 0 && pct / 10 != last_pct_ / 10)) {
      if (!drawn_) std::fprintf(stderr, "%s: %s...\n", cmd_.c_str(), phase_.c_str());
      else std::fprintf(stderr, "%s: %s %d%%\n", cmd_.c_str(), phase_.c_str(), pct);
      drawn_ = true;
    }
    std::fflush(stderr);
    last_pct_ = pct;
  }
  // Ends the current phase with a line saying how long it took.
  void finish() {
    if (phase_.empty()) return;
    if (show_after_s_ > 0 && !drawn_) {  // never shown: too quick to mention
      phase_.clear();
      return;
    }
    const double s = std::chrono::duration<double>(clock::now() - started_).count();
    if (tty_) std::fprintf(stderr, "\r%s: %s done in %.1f s%30s\n", cmd_.c_str(), phase_.c_str(), s, "");
    else std::fprintf(stderr, "%s: %s done in %.1f s\n", cmd_.c_str(), phase_.c_str(), s);
    phase_.clear();
    drawn_ = false;
  }
  // A C callback (fish_progress_fn) that forwards to update().
  static void callback(void* self, const char* phase, float fraction) {
    static_cast<Progress*>(self)->update(phase ? phase : "", fraction);
  }

 private:
  using clock = std::chrono::steady_clock;
  std::string cmd_, phase_;
  bool tty_;
  double show_after_s_ = 0;
  bool drawn_ = false;
  int last_pct_ = -2;
  clock::time_point started_{};
};

}  // namespace fish::cli
