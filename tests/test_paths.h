// Where tests find the shared data (../shared from the project root, read in
// place) and the build's bin folder.
#pragma once
#include <string>

namespace fish::test {
inline std::string shared_path(const std::string& rel) { return std::string(FISH_SHARED_DIR) + "/" + rel; }
inline std::string model_path(const std::string& name) { return shared_path("models/" + name); }
inline std::string bin_path(const std::string& name) { return std::string(FISH_BIN_DIR) + "/" + name; }
inline std::string source_path(const std::string& rel) { return std::string(FISH_SOURCE_DIR) + "/" + rel; }
}  // namespace fish::test
