// A scratch folder per test process for the MoE tests' synthesised models:
// made on first use, removed at exit by the process that made it (a plugin
// probe's forked child runs exit handlers too, and must not remove it).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

namespace fish::test {

inline const std::filesystem::path& scratch_dir(const char* prefix) {
  static const std::filesystem::path dir = [prefix] {
    std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
    const char* d = mkdtemp(tmpl.data());
    REQUIRE(d);
    return std::filesystem::path(d);
  }();
  static struct Cleanup {
    pid_t pid = getpid();
    ~Cleanup() {
      if (getpid() != pid) return;
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup;
  return dir;
}

}  // namespace fish::test
