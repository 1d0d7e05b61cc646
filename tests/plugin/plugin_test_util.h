// Helpers for the plugin tests: temporary folders, copying binaries, running a
// command with a given working directory and environment, finding plugins.
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "fish/plugin_abi.h"

// The engine's ABI version as the loader prints it ("2.0"), for expected messages.
#define FISH_TEST_STR2(x) #x
#define FISH_TEST_STR(x) FISH_TEST_STR2(x)
#define FISH_TEST_ABI_TEXT FISH_TEST_STR(FISH_PLUGIN_ABI_MAJOR) "." FISH_TEST_STR(FISH_PLUGIN_ABI_MINOR)

namespace fish::test {

// A fresh folder under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path sub(const std::string& name) const;  // creates the subfolder

 private:
  std::filesystem::path path_;
};

struct ProcResult {
  int status = -1;  // exit status (-1: did not run / signalled)
  std::string out, err;
};

// Runs argv[0] with argv[1..] (no shell expansion of the arguments) in `cwd`,
// with `env` added to (or, for an empty value, removed from) the environment.
ProcResult run_process(const std::vector<std::string>& argv, const std::string& cwd,
                       const std::vector<std::pair<std::string, std::string>>& env = {});

// Copies file into dir (as new_name when given); returns the new path.
std::string copy_into(const std::string& file, const std::filesystem::path& dir, const std::string& new_name = "");

// A test-only plugin built into build/test_plugins (name without prefix/suffix).
std::string test_plugin(const std::string& name);

// Plugin files (fish_<name> shared libraries) in a folder, sorted.
std::vector<std::string> plugin_files_in(const std::string& folder);

bool contains(const std::string& hay, const std::string& needle);

}  // namespace fish::test
