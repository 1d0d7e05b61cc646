#include "model/requant_auto.h"

namespace fish {

RequantAutoChoice simulate_placement(const RequantCandidate& c, uint64_t budget,
                                     const std::function<uint64_t(int32_t)>& reserve) {
  RequantAutoChoice r;
  r.mode = c.mode;
  const int32_t want = int32_t(c.layer_bytes.size());
  uint64_t used = 0;
  const bool has_output = c.output_bytes > 0;
  if (has_output && c.output_bytes + reserve(want > 0 ? 1 : 0) <= budget) {
    used = c.output_bytes;
    r.output = true;
  }
  bool experts = !c.expert_bytes.empty();
  int32_t experts_wanted = 0;
  for (uint64_t b : c.expert_bytes) experts_wanted += b != RequantCandidate::kHostExperts;
  while (r.layers < want) {
    const uint64_t next = used + c.layer_bytes[size_t(r.layers)];
    if (next < used || next + reserve(r.layers + 1) > budget) break;
    used = next;
    if (experts) {
      const uint64_t eb = c.expert_bytes[size_t(r.layers)];
      const uint64_t with = used + eb;
      if (eb != RequantCandidate::kHostExperts && with >= used && with + reserve(r.layers + 1) <= budget) {
        used = with;
        ++r.expert_layers;
      } else {
        experts = false;
      }
    }
    ++r.layers;
  }
  r.everything = r.layers == want && r.expert_layers == experts_wanted && (r.output || !has_output);
  return r;
}

RequantAutoChoice choose_requant_mode(const std::vector<RequantCandidate>& candidates, uint64_t budget,
                                      const std::function<uint64_t(int32_t)>& reserve) {
  RequantAutoChoice best;
  bool have = false;
  for (const RequantCandidate& c : candidates) {
    const RequantAutoChoice r = simulate_placement(c, budget, reserve);
    if (r.everything) return r;
    // More layers' experts on the device wins, then more layers, then the
    // output; a tie keeps the milder (earlier) mode.
    const bool better = r.expert_layers != best.expert_layers ? r.expert_layers > best.expert_layers
                        : r.layers != best.layers             ? r.layers > best.layers
                                                              : r.output && !best.output;
    if (!have || better) {
      best = r;
      have = true;
    }
  }
  return best;
}

}  // namespace fish
