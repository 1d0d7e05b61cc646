// FISH_GPU_REQUANT=auto at placement: the device bytes of the candidate layers
// (an MoE layer's expert stacks apart: they go to the device only for its
// span) and the output projection under each mode, against what the backend
// has free, through requant_auto.h's choice.
#include <algorithm>
#include <cstdio>
#include <string>

#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "model/requant_auto.h"

namespace fish {

RequantMode LlamaModel::choose_requant_auto(ComputeBackend* be, int32_t end, int32_t want, int32_t experts_from,
                                            const std::vector<uint64_t>& reserve_for,
                                            const std::function<bool(GgmlType)>& supports) {
  const uint64_t budget = be->memory_free();
  // A matrix the backend takes in no form can never be placed: its layer
  // costs more than any budget.
  const uint64_t never = budget + 1;
  auto device_bytes = [&](const Linear& lin, RequantMode m, bool output) -> uint64_t {
    if (!lin.tensor) return 0;
    const GgmlType to = requant_device_type(m, lin.tensor->type, output, supports);
    if (!supports(to)) return never;
    const auto row = ggml_row_bytes(uint32_t(to), lin.tensor->ne[0]);
    return row ? *row * uint64_t(lin.tensor->n_rows()) : never;
  };
  std::vector<RequantCandidate> candidates;
  for (RequantMode m : {RequantMode::Off, RequantMode::ToQ4K, RequantMode::Mixed, RequantMode::AllFq3}) {
    RequantCandidate c;
    c.mode = m;
    c.output_bytes = std::max<uint64_t>(1, device_bytes(output_, m, true));
    for (int32_t l = end - 1; l >= end - want; --l) {
      const Layer& L = layers_[size_t(l)];
      uint64_t sum = 0;
      for (const Linear* lin : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down, &L.router, &L.gate_shexp,
                                &L.up_shexp, &L.down_shexp})
        sum = std::min(never, sum + device_bytes(*lin, m, false));
      c.layer_bytes.push_back(sum);
      if (!hp_.moe() || experts_from >= end) continue;
      // The stacks as placement uploads them (requant_device_type, matrix by
      // matrix: the stack's bytes are n_expert matrices' rows).
      uint64_t ex = l < experts_from ? RequantCandidate::kHostExperts : 0;
      for (const Experts* e : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
        if (ex == RequantCandidate::kHostExperts) break;
        const GgmlType to = requant_device_type(m, e->tensor->type, false, supports);
        const auto row = ggml_row_bytes(uint32_t(to), e->tensor->ne[0]);
        if (!supports(to) || !row) {
          ex = RequantCandidate::kHostExperts;  // the backend takes this stack in no form
          break;
        }
        ex += *row * uint64_t(e->tensor->n_rows());
      }
      c.expert_bytes.push_back(ex);
    }
    candidates.push_back(std::move(c));
  }
  const RequantAutoChoice r = choose_requant_mode(
      candidates, budget, [&](int32_t k) { return k < int32_t(reserve_for.size()) ? reserve_for[size_t(k)] : 0; });
  if (gpu_verbose_) {
    std::string sizes;  // what each mode's layers + output would take
    for (const RequantCandidate& c : candidates) {
      uint64_t sum = c.output_bytes;
      for (uint64_t b : c.layer_bytes) sum = std::min(never, sum + b);
      for (uint64_t b : c.expert_bytes)
        if (b != RequantCandidate::kHostExperts) sum = std::min(never, sum + b);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s: %.2f MB", sizes.empty() ? "" : ", ", requant_mode_name(c.mode),
                    sum >= never ? -1.0 : double(sum) / 1e6);
      sizes += buf;
    }
    std::string experts;
    if (!candidates.empty() && !candidates[0].expert_bytes.empty())
      experts = ", " + std::to_string(r.expert_layers) + " with their experts";
    std::fprintf(stderr, "fish: FISH_GPU_REQUANT=auto: mode %s (%s: %d of %d layers%s%s; %.2f MB free; %s)\n",
                 requant_mode_name(r.mode), r.everything ? "everything fits" : "the most layers", r.layers, want,
                 experts.c_str(), r.output ? " + output" : "", double(budget) / 1e6, sizes.c_str());
  }
  return r.mode;
}

}  // namespace fish
