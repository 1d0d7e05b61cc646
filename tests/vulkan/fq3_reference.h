// ../shared/reference/fq3, read in place (never copied): 64 FQ3 blocks made
// from the spec's text alone and the f32 values they decode to (its README),
// as a weight matrix of 64 rows x 256 (one block per row) for the fish_vulkan
// tests. Block 1 has d = dmin = NaN: its 256 values are NaN.
#pragma once
#include <string>
#include <vector>

#include "vk_test_util.h"

namespace fish::vktest {

constexpr int kFq3RefBlocks = 64;
constexpr int kFq3NanBlock = 1;

struct Fq3Reference {
  Matrix m;                   // FQ3, 64 rows x 256
  std::vector<float> values;  // [64][256]: row r's decoded values
};

// The files in dir (test::shared_path("reference/fq3")) as a matrix; empty
// (m.n_out == 0) when they cannot be read or have the wrong size (the caller
// REQUIREs).
Fq3Reference read_fq3_reference(const std::string& dir);

// The same without the NaN block: 63 rows (the int8 products compare with
// the CPU's, which a NaN row would only make NaN).
Fq3Reference fq3_reference_finite(const Fq3Reference& ref);

}  // namespace fish::vktest
