// Draft-free proposals ("prompt lookup decoding"): text that repeats itself
// (code being edited, a document quoted back, a list) is predicted by what
// followed the last few tokens the previous time they occurred.
#pragma once
#include <cstdint>
#include <vector>

namespace fish::spec {

// Looks for the latest earlier occurrence of the last k tokens of hist[0, n),
// k from n_max down to n_min (the first k that matches wins), and proposes up
// to max_n of the tokens that followed it into `out` (cleared first). Where the
// copied span reaches the end of hist, it continues with its own proposals: a
// run repeating with period p goes on repeating. Returns out.size() (0: no
// match). O(n * n_max) per call.
int32_t ngram_propose(const int32_t* hist, int32_t n, int32_t n_min, int32_t n_max, int32_t max_n,
                      std::vector<int32_t>& out);

}  // namespace fish::spec
