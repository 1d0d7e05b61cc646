#include "plugin_test_util.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fish::test {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path_ = fs::temp_directory_path() /
          ("fish-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path TempDir::sub(const std::string& name) const {
  fs::path p = path_ / name;
  fs::create_directories(p);
  return p;
}

static std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ProcResult run_process(const std::vector<std::string>& argv, const std::string& cwd,
                       const std::vector<std::pair<std::string, std::string>>& env) {
  ProcResult r;
  TempDir io("proc");
  const fs::path out = io.path() / "out", err = io.path() / "err";
  const pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    // Child: cwd, environment, redirections, exec.
    if (chdir(cwd.c_str()) != 0) _exit(126);
    for (const auto& [k, v] : env) {
      if (v.empty()) unsetenv(k.c_str());
      else setenv(k.c_str(), v.c_str(), 1);
    }
    const int fo = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int fe = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) _exit(126);
    dup2(fo, 1);
    dup2(fe, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string copy_into(const std::string& file, const fs::path& dir, const std::string& new_name) {
  const fs::path to = dir / (new_name.empty() ? fs::path(file).filename() : fs::path(new_name));
  fs::copy_file(file, to, fs::copy_options::overwrite_existing);
  fs::permissions(to, fs::status(file).permissions());
  return to.string();
}

std::string test_plugin(const std::string& name) {
  return std::string(FISH_TEST_PLUGIN_DIR) + "/libfish_" + name + ".so";
}

std::vector<std::string> plugin_files_in(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string n = e.path().filename().string();
    const bool pre = n.rfind("libfish_", 0) == 0 || n.rfind("fish_", 0) == 0;
    if (pre && n.size() > 3 && n.compare(n.size() - 3, 3, ".so") == 0) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace fish::test
