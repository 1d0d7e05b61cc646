// After placement: the matrices the CPU will multiply (every layer not on the
// backend, and the output projection unless it is resident there) are
// repacked once into the layout this CPU's kernels read fastest (cpu/matmul.h,
// prepare_weights; strips of the K-quants Q4_K / Q5_K / Q6_K and of Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 on AVX-512 VNNI and AVX2). The mmap pages of a
// repacked tensor go back to the OS, so resident memory stays the model's
// size; token_embd keeps its pages (embedding lookups read it), so a tied
// output projection costs its size once more. FISH_CPU_REPACK=0 (the load's
// configuration) turns it off.
// After a fallback to the CPU the layers that were on the backend are
// repacked too, so the CPU path stays the same arithmetic as a CPU-only run.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"

namespace fish {

void LlamaModel::prepare_cpu_weights() {
  if (!cfg_.cpu_repack) return;
  // Matrices the CPU multiplies that are still in the GGUF layout (called
  // again after a fallback to the CPU: the layers that were on the backend).
  std::vector<Linear*> cpu;
  auto want = [&](Linear* m) {
    if (m->tensor && !m->gpu && m->cpu.layout == WeightLayout::Gguf) cpu.push_back(m);
  };
  want(&output_);
  for (int32_t l = 0; l < hp_.n_layer; ++l) {  // every layer not on a device (several devices: CPU layers between them)
    Layer& L = layers_[size_t(l)];
    for (Linear* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down, &L.router, &L.gate_shexp, &L.up_shexp,
                      &L.down_shexp})
      want(m);
  }
  prepare_cpu_experts();
  if (cpu.empty()) return;
  // In groups of a layer's worth (7 matrices), so a load can report progress.
  uint64_t total = 0, done = 0;
  for (Linear* m : cpu) total += m->tensor->nbytes;
  for (size_t g0 = 0; g0 < cpu.size(); g0 += 7) {
    report("repacking CPU weights", total ? double(done) / double(total) : 0.0);
    const size_t g1 = std::min(cpu.size(), g0 + 7);
    std::vector<WeightView> views;
    for (size_t i = g0; i < g1; ++i) views.push_back(cpu[i]->cpu);
    std::vector<PreparedWeight> prepared;
    try {
      prepared = prepare_weights(views.data(), int(views.size()), pool_.get());
    } catch (const Error& e) {  // e.g. no memory for the copy: the GGUF layout works as well, only slower
      std::fprintf(stderr, "fish: CPU weights stay in the GGUF layout: %s\n", e.what());
      return;
    }
    for (size_t i = g0; i < g1; ++i) {
      done += cpu[i]->tensor->nbytes;
      PreparedWeight& pw = prepared[i - g0];
      if (!pw.repacked()) continue;
      Linear& lin = *cpu[i];
      lin.cpu = pw.view();
      repacked_bytes_ += pw.owned_bytes();
      if (lin.tensor != tok_embd_) file_->release_pages(lin.tensor->data, lin.tensor->nbytes);
      prepared_.push_back(std::move(pw));
    }
  }
  report("repacking CPU weights", 1.0);
  if (cfg_.gpu_verbose > 0 && repacked_bytes_)
    std::fprintf(stderr, "fish: %zu CPU matrices repacked (%.0f MB)\n", prepared_.size(), double(repacked_bytes_) / 1e6);
}

// The experts the CPU multiplies (every layer's whose stack is not resident in
// a span): each expert repacked as a matrix of its own, one prepare_weights
// call per stack; the stack's mmap pages go back once all of it is repacked.
void LlamaModel::prepare_cpu_experts() {
  if (!cfg_.cpu_repack || !hp_.moe()) return;
  uint64_t total = 0, done = 0;
  std::vector<Experts*> todo;
  for (Layer& L : layers_)
    for (Experts* ex : {&L.gate_exps, &L.up_exps, &L.down_exps})
      if (ex->tensor && !ex->gpu && !ex->cpu.empty() && ex->cpu[0].layout == WeightLayout::Gguf) {
        todo.push_back(ex);
        total += ex->tensor->nbytes;
      }
  for (Experts* ex : todo) {
    report("repacking CPU experts", total ? double(done) / double(total) : 0.0);
    std::vector<PreparedWeight> prepared;
    try {
      prepared = prepare_weights(ex->cpu.data(), int(ex->cpu.size()), pool_.get());
    } catch (const Error& e) {
      std::fprintf(stderr, "fish: CPU experts stay in the GGUF layout: %s\n", e.what());
      return;
    }
    done += ex->tensor->nbytes;
    bool all = true;
    for (size_t e = 0; e < prepared.size(); ++e) {
      PreparedWeight& pw = prepared[e];
      if (!pw.repacked()) {
        all = false;
        continue;
      }
      ex->cpu[e] = pw.view();
      repacked_bytes_ += pw.owned_bytes();
      prepared_.push_back(std::move(pw));
    }
    if (all && ex->parts.empty()) file_->release_pages(ex->tensor->data, ex->tensor->nbytes);
    if (all)
      for (const gguf::TensorInfo* pt : ex->parts) file_->release_pages(pt->data, pt->nbytes);
  }
  if (!todo.empty()) report("repacking CPU experts", 1.0);
}

}  // namespace fish
