// Several devices in one host (FISH_GPU_DEVICE=0,1; the same index twice is
// one GPU opened as two logical devices): the GPU layers [n_layer - want,
// n_layer) split into consecutive ranges, the first device the first range,
// in proportion to each device's free memory (the head device's less the
// output projection), or to FISH_TENSOR_SPLIT / --tensor-split as given (the
// proportions llama.cpp's -ts takes: "3,1" puts 3/4 of the layers on the
// first device). The output projection goes to the device with the most room
// (ties: the last one, whose span then ends with the head; with a split as
// given, among the devices it gives layers), placed first as
// with one device. Each device then places its range as a single device
// places the model's last layers (place_on_device: from its last layer back
// while they fit, one span with its own KV for every sequence); what does not
// fit runs on the CPU between the spans (eval_chunk walks them in order, x
// [n_tok, n_embd] f32 crossing through host memory).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"

namespace fish {

namespace {

std::string list_text(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

}  // namespace

// The layer ranges of `share` over [first, first + want): boundaries at the
// rounded cumulative proportions, so the counts add up to want exactly.
std::vector<int32_t> split_layers(const std::vector<double>& share, int32_t first, int32_t want) {
  double total = 0;
  for (double s : share) total += s;
  std::vector<int32_t> bounds{first};
  double cum = 0;
  for (size_t k = 0; k < share.size(); ++k) {
    cum += share[k];
    const int32_t b = k + 1 == share.size() ? first + want
                                             : first + int32_t(std::lround(double(want) * (total > 0 ? cum / total : double(k + 1) / double(share.size()))));
    bounds.push_back(std::max(bounds.back(), std::min(first + want, b)));
  }
  return bounds;
}

void LlamaModel::place_devices(const ModelOptions& opt, const std::vector<ComputeBackend*>& bes,
                               const std::vector<int32_t>& devices, int32_t want,
                               std::unique_ptr<Requantizer>& requant) {
  const size_t n = bes.size();
  const std::string listed = "FISH_GPU_DEVICE=" + list_text(devices);
  if (!cfg_.tensor_split.empty() && cfg_.tensor_split.size() != n) {
    std::string split;
    for (double x : cfg_.tensor_split) {
      char b[32];
      std::snprintf(b, sizeof b, "%s%g", split.empty() ? "" : ",", x);
      split += b;
    }
    throw Error("tensor split " + split + " (--tensor-split, FISH_TENSOR_SPLIT) has " +
                std::to_string(cfg_.tensor_split.size()) + (cfg_.tensor_split.size() == 1 ? " value" : " values") +
                " for " + std::to_string(n) + " devices (" + listed +
                "): give one proportion per device");
  }
  // Each device's room now; the output projection goes where there is most.
  // With a split as given, among the devices it gives layers: one given none
  // stays unused, as asked, even where it reports a little more room (one GPU
  // opened twice: the second opening sees the first's allocations).
  std::vector<double> free(n);
  for (size_t k = 0; k < n; ++k) free[k] = double(bes[k]->memory_free());
  std::vector<double> share = cfg_.tensor_split;
  const bool by_memory = share.empty();
  std::vector<int32_t> bounds;
  if (!by_memory) bounds = split_layers(share, hp_.n_layer - want, want);
  auto has_layers = [&](size_t k) { return by_memory || bounds[k + 1] > bounds[k]; };
  size_t head = n - 1;
  while (head > 0 && !has_layers(head)) --head;
  for (size_t k = head; k-- > 0;)
    if (has_layers(k) && free[k] > free[head]) head = k;
  if (by_memory) {
    share = free;
    share[head] = std::max(0.0, share[head] - double(output_.tensor->nbytes));
    bounds = split_layers(share, hp_.n_layer - want, want);
  }
  parts_.assign(n, DevicePart{});
  for (size_t k = 0; k < n; ++k) {
    DevicePart& d = parts_[k];
    d.be = bes[k];
    d.device = devices[k];
    d.slot = int32_t(k);
    d.first = bounds[k];
    d.end = bounds[k + 1];
    d.span_first = d.end;
  }
  if (gpu_verbose_) {
    std::string ranges;
    for (size_t k = 0; k < n; ++k) {
      char b[160];
      std::snprintf(b, sizeof b, "%sdevice %d layers %d-%d (%.0f MB free)", k ? ", " : "", parts_[k].device,
                    parts_[k].first, parts_[k].end - 1, free[k] / 1e6);
      ranges += b;
    }
    std::fprintf(stderr, "fish: %zu devices (%s), layers %s: %s; output on device %d\n", n, listed.c_str(),
                 by_memory ? "by free memory" : "by the tensor split", ranges.c_str(), parts_[head].device);
  }
  // The head's device first (the output projection before its layers), then the others in order.
  std::vector<size_t> order{head};
  for (size_t k = 0; k < n; ++k)
    if (k != head) order.push_back(k);
  for (size_t k : order) {
    DevicePart& d = parts_[k];
    part_label_ = " device " + std::to_string(d.device) + " (layers " + std::to_string(d.first) + "-" +
                  std::to_string(d.end - 1) + ")";
    place_on_device(opt, d, k == head, requant);
  }
  part_label_.clear();
}

}  // namespace fish
