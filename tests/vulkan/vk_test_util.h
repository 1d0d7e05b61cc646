// Helpers shared by the fish_vulkan tests: the configuration they run with
// and opening a backend on it, random weights of any GGUF type, and the
// spec's bound check against the engine's f32 reference product
// (fish::matmul_ref_f32).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "common/ggml_type.h"
#include "test_skip.h"

namespace fish::vktest {

// The configuration the tests start from: the caller's FISH_* variables (read
// once), on a GPU when there is one; when there is none and the caller did
// not set FISH_GPU, on a CPU implementation (FISH_GPU=cpu: lavapipe), so the
// kernels really run wherever Mesa is installed. Tests change its fields, not
// the environment.
const vk::VkConfig& test_config();
vk::VulkanBackend::Options test_options(const vk::VkConfig& cfg = test_config());

// A backend opened with opt, or nullptr when it finds no device (the
// caller skips: FISH_SKIP(skip_reason())). Prints the device it runs on.
std::unique_ptr<vk::VulkanBackend> open_backend(const std::string& test, vk::VulkanBackend::Options opt = test_options());
// Why the last helper returned nullptr (open_backend: no device), for FISH_SKIP.
std::string& skip_reason();

// A weight matrix in GGUF layout: n_out rows of n_in elements of `type`.
struct Matrix {
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0, n_out = 0;
  uint64_t row_bytes = 0;
  std::vector<uint8_t> data;
  std::string name;
};

// Random weights (per-row scales vary over ~2 decades, some outliers) quantised
// to `type` with the engine's quantize_row.
Matrix random_matrix(GgmlType type, int64_t n_in, int64_t n_out, uint64_t seed);
// x: [n_tok, n_in] ~ N(0, 1).
std::vector<float> random_x(int n_tok, int64_t n_in, uint64_t seed);

vk::WeightUpload upload_desc(const Matrix& m);

// Checks y [n_tok, n_out] against matmul_ref_f32 with the spec's per-element
// bound |y - ref| <= 1e-3 * (Σ_r Σ_i |w_ri| |x_ti|) / n_out (token t). Returns
// the largest |y - ref| / bound seen (must be <= 1); the number of violations
// goes to *n_bad.
double bound_ratio(const Matrix& w, const float* x, int n_tok, const float* y, int64_t* n_bad, double rel = 1e-3);

std::string type_name(GgmlType t);

// One token's activations quantised as the CPU does (quantize_row: Q8_K for
// bs 256, Q8_0 for 32), in the layout of the GPU's int8 rows
// (quantize_x.comp: qs words | d f32 | int32 sums), for word-by-word comparison.
std::vector<uint32_t> cpu_q8_row(const float* x, int n, uint32_t bs);
// The same in the span's B32 layout (MatmulKernels::b32_row_words): every block
// of 32 quantised by the CPU's Q8_K quantiser on its own (zero-padded to 256,
// which leaves its maximum, scale and values as they are), sums per 16.
std::vector<uint32_t> cpu_b32_row(const float* x, int n);
// The values a B32 row of n elements holds: qs[i] · d[i / 32], exact in double.
std::vector<double> b32_values(const std::vector<uint32_t>& row, int n);

// One token's k pairs' words (expert, weight as f32 bits) that a kernel wrote,
// against the CPU's routing (cpu/moe_routing.h) of the logits it routed:
// experts that differ, and the largest relative error of a weight.
struct RouteCheck {
  int id_bad = 0;
  double wrel = 0;
};
RouteCheck check_route_words(const uint32_t* words, const float* logits, int n_expert, int k, bool renorm);

}  // namespace fish::vktest
