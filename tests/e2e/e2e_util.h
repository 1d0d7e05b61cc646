// Helpers for the end-to-end tests: model loading through the C API, greedy
// decoding, the reference TSV files, and running the fish binary.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fish/fish.h"

namespace fish::test {

struct ModelHandle {
  fish_model* m = nullptr;
  explicit ModelHandle(const std::string& path, int32_t gpu_layers = 0, int32_t n_ctx = 0, int32_t threads = 2);
  ~ModelHandle() { fish_model_free(m); }
  fish_model_info info() const;
};

std::vector<int32_t> tokenize(fish_model* m, const std::string& text, bool add_special);
std::string detokenize_pieces(fish_model* m, const std::vector<int32_t>& ids);

// Greedy continuation of `prompt_ids`: up to n tokens, stopping at EOG (not included).
std::vector<int32_t> greedy(fish_model* m, const std::vector<int32_t>& prompt_ids, int n);

// Parses a reference TSV; JSON string fields ("...") are unescaped.
std::vector<std::vector<std::string>> read_tsv(const std::string& path);
std::string json_unquote(const std::string& s);

// Runs a shell command; returns stdout, and the exit status in *status.
std::string run_command(const std::string& cmd, int* status);

}  // namespace fish::test
