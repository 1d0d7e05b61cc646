// What the benchmark tools (fish_bench_attention, fish_bench_vk_span) share:
// a monotonic clock in seconds and their comma lists of integers (--depths
// 0,2048). Header only: the tools link nothing else of the tests.
#pragma once
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace fish::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "0,2048" -> {0, 2048} (atoi per item, as the tools always read them).
inline std::vector<int> int_list(const std::string& s) {
  std::vector<int> v;
  size_t at = 0;
  while (at < s.size()) {
    const size_t c = s.find(',', at);
    v.push_back(std::atoi(s.substr(at, c == std::string::npos ? std::string::npos : c - at).c_str()));
    if (c == std::string::npos) break;
    at = c + 1;
  }
  return v;
}

}  // namespace fish::bench
