// FISH_GPU_REQUANT=auto: which mode to use for this model on this device.
// The mildest of 0, 2, 3, 1 whose device copies put every wanted layer and the
// output projection within the memory the backend has free (with the span's
// reserve kept free, as placement keeps it); when none does, the mode that
// places the most layers (the milder on a tie). Sizes are what the converted
// weights take (row bytes), so the choice is an estimate: placement itself
// still trusts upload() and the backend's memory counts.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "common/requant_mode.h"

namespace fish {

struct RequantCandidate {
  RequantMode mode = RequantMode::Off;
  // Device bytes of each candidate layer in placement order (the last layer
  // of the model first), and of the output projection (0: there is none to place).
  std::vector<uint64_t> layer_bytes;
  uint64_t output_bytes = 0;
};

struct RequantAutoChoice {
  RequantMode mode = RequantMode::Off;
  int32_t layers = 0;   // layers this mode places (estimated)
  bool output = false;  // ... and the output projection
  bool everything = false;
};

// The layers and output a mode places: output first (if a one-layer span's
// reserve still fits beside it), then layers while their bytes and the
// reserve of a span of that many layers fit. reserve(k): bytes a span of k
// layers needs beyond its weights (0 without spans).
RequantAutoChoice simulate_placement(const RequantCandidate& c, uint64_t budget,
                                     const std::function<uint64_t(int32_t)>& reserve);

// candidates: mildest first (0, 2, 3, 1).
RequantAutoChoice choose_requant_mode(const std::vector<RequantCandidate>& candidates, uint64_t budget,
                                      const std::function<uint64_t(int32_t)>& reserve);

}  // namespace fish
