// FISH_GPU_REQUANT=auto: which mode to use for this model on this device.
// The mildest of 0, 2, 3, 1 whose device copies put every wanted layer, the
// experts of every MoE layer that may hold them on the device, and the output
// projection within the memory the backend has free (with the span's reserve
// kept free, as placement keeps it); when none does, the mode that puts the
// most layers' experts on the device, then the most layers, then the output
// (the milder on a tie). An MoE layer whose experts stay in host memory runs
// them on the CPU (most of its work and bytes), so a mode that keeps more
// layers' experts on the device wins even if it places fewer layers in all.
// Sizes are what the converted weights take (row bytes), so the choice is an
// estimate: placement itself still trusts upload() and the backend's memory counts.
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
  // MoE: the device bytes of each candidate layer's expert stacks, in the
  // same order (empty: no experts go to the device). kHostExperts: that
  // layer's experts stay in host memory whatever fits (--n-cpu-moe).
  std::vector<uint64_t> expert_bytes;
  static constexpr uint64_t kHostExperts = ~uint64_t(0);
};

struct RequantAutoChoice {
  RequantMode mode = RequantMode::Off;
  int32_t layers = 0;         // layers this mode places (estimated)
  int32_t expert_layers = 0;  // ... of them with their experts on the device
  bool output = false;        // ... and the output projection
  bool everything = false;
};

// The layers and output a mode places, in placement's order: output first
// (if a one-layer span's reserve still fits beside it), then layers while
// their bytes and the reserve of a span of that many layers fit; an MoE
// layer's experts after its other weights while they fit too, and once one
// layer's do not (or must stay on the host), no further layer's (placement
// keeps the first layers' experts on the host). reserve(k): bytes a span of
// k layers needs beyond its weights (0 without spans).
RequantAutoChoice simulate_placement(const RequantCandidate& c, uint64_t budget,
                                     const std::function<uint64_t(int32_t)>& reserve);

// candidates: mildest first (0, 2, 3, 1).
RequantAutoChoice choose_requant_mode(const std::vector<RequantCandidate>& candidates, uint64_t budget,
                                      const std::function<uint64_t(int32_t)>& reserve);

}  // namespace fish
