#include "e2e_util.h"

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace fish::test {

ModelHandle::ModelHandle(const std::string& path, int32_t gpu_layers, int32_t n_ctx, int32_t threads) {
  fish_model_params p = fish_model_default_params();
  p.gpu_layers = gpu_layers;
  p.n_ctx = n_ctx;
  p.n_threads = threads;
  fish_error* err = nullptr;
  m = fish_model_load(path.c_str(), &p, &err);
  if (!m) {
    std::string msg = fish_error_message(err);
    fish_error_free(err);
    FAIL("loading " << path << ": " << msg);
  }
}

fish_model_info ModelHandle::info() const {
  fish_model_info i{};
  i.struct_size = sizeof i;
  fish_model_get_info(m, &i);
  return i;
}

std::vector<int32_t> tokenize(fish_model* m, const std::string& text, bool add_special) {
  std::vector<int32_t> ids(text.size() + 8);
  int32_t n = fish_tokenize(m, text.data(), text.size(), add_special, 0, ids.data(), int32_t(ids.size()));
  REQUIRE(n >= 0);
  ids.resize(size_t(n));
  return ids;
}

std::string detokenize_pieces(fish_model* m, const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    char buf[512];
    int32_t n = fish_token_to_piece(m, id, buf, sizeof buf, 0);
    REQUIRE(n >= 0);
    out.append(buf, size_t(n));
  }
  return out;
}

std::vector<int32_t> greedy(fish_model* m, const std::vector<int32_t>& prompt_ids, int n) {
  std::vector<int32_t> out;
  REQUIRE(fish_eval(m, prompt_ids.data(), int32_t(prompt_ids.size()), 0, 0) == 0);
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m, &info);
  int32_t pos = int32_t(prompt_ids.size());
  for (int i = 0; i < n; ++i) {
    const float* lg = fish_get_logits(m, -1);
    int32_t best = 0;
    for (int32_t k = 1; k < info.n_vocab; ++k)
      if (lg[k] > lg[best]) best = k;
    if (fish_token_is_eog(m, best)) break;
    out.push_back(best);
    if (i + 1 < n) REQUIRE(fish_eval(m, &best, 1, pos++, 0) == 0);
  }
  return out;
}

std::vector<std::vector<std::string>> read_tsv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, '\t')) f.push_back(cell);
    rows.push_back(f);
  }
  return rows;
}

std::string json_unquote(const std::string& s) {
  if (s.size() < 2 || s.front() != '"') return s;
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = s[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'u': {
        unsigned cp = unsigned(std::stoul(s.substr(i + 1, 4), nullptr, 16));
        i += 4;
        if (cp < 0x80) out += char(cp);
        else if (cp < 0x800) { out += char(0xC0 | (cp >> 6)); out += char(0x80 | (cp & 0x3F)); }
        else { out += char(0xE0 | (cp >> 12)); out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F)); }
        break;
      }
      default: out += e;
    }
  }
  return out;
}

std::string run_command(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace fish::test
