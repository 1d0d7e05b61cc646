#include "spec/ngram_lookup.h"

#include <algorithm>

namespace fish::spec {

int32_t ngram_propose(const int32_t* hist, int32_t n, int32_t n_min, int32_t n_max, int32_t max_n,
                      std::vector<int32_t>& out) {
  out.clear();
  if (max_n <= 0 || n_min < 1) return 0;
  for (int32_t k = std::min(n_max, n - 1); k >= n_min; --k) {
    const int32_t* pat = hist + (n - k);
    // Latest start s < n - k whose k tokens equal the pattern (s = n - k is the pattern itself).
    for (int32_t s = n - k - 1; s >= 0; --s) {
      if (!std::equal(pat, pat + k, hist + s)) continue;
      // The hypothesis: x[i] = x[i - p] with p = (n - k) - s, from position n on.
      const int32_t from = s + k;
      for (int32_t j = 0; j < max_n; ++j) {
        const int32_t idx = from + j;
        out.push_back(idx < n ? hist[idx] : out[size_t(idx - n)]);
      }
      return int32_t(out.size());
    }
  }
  return 0;
}

}  // namespace fish::spec
