// The re-quantisation part of `fish test-gpu` (FISH_GPU_REQUANT / --requant):
// every matrix the mode converts, converted as a load converts it
// (model/requant.h), with
//  - its error: relative RMS of the device copy's values against the GGUF's
//    own decoded values (the spec measured 13.9-14.6% for Q4_K -> FQ3 and
//    7.3-7.5% for Q6_K -> Q4_K on real 1B weights). A conversion is counted
//    failed past 20% (FQ3) / 10% (Q4_K): far beyond what 3 / 4 bits with a
//    fitted affine grid give, so only a broken conversion gets there;
//  - for the blk.0 matrices whose converted type the backend takes: the
//    backend's kernel on the converted bytes against the CPU's decode of the
//    same bytes (gpu_weight_check.h), so the device's FQ3 / Q4_K decoder is
//    checked apart from the conversion's error.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "capi/capi_util.h"
#include "capi/gpu_weight_check.h"
#include "common/engine_config.h"
#include "common/error.h"
#include "cpu/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/requant.h"
#include "quant/quant.h"

namespace {

using fish::GgmlType;
using fish::RequantMode;

// The projections of a layer, by the suffix of their tensor name: the dense
// ones, an MoE layer's router, shared expert and expert stacks (3-D, n_expert
// matrices), and an older Mixtral file's experts one tensor each
// ("blk.N.ffn_gate.E.weight").
bool layer_matrix(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return false;
  auto ends = [&](const std::string& suf) {
    return name.size() > suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
  };
  for (const char* s : {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight",
                        ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight", ".ffn_gate_inp.weight",
                        ".ffn_gate_shexp.weight", ".ffn_up_shexp.weight", ".ffn_down_shexp.weight",
                        ".ffn_gate_exps.weight", ".ffn_up_exps.weight", ".ffn_down_exps.weight"})
    if (ends(s)) return true;
  for (const char* s : {".ffn_gate.", ".ffn_up.", ".ffn_down."}) {  // ".ffn_gate.E.weight"
    const size_t at = name.find(s);
    if (at == std::string::npos || !ends(".weight")) continue;
    const size_t d0 = at + std::string(s).size(), d1 = name.size() - 7;
    if (d1 > d0 && name.find_first_not_of("0123456789", d0) == d1) return true;
  }
  return false;
}

// sqrt(Σ (a − b)²) / sqrt(Σ a²) of two matrices' decoded values, rows over the pool.
double relative_rms(fish::ThreadPool& pool, GgmlType ta, const uint8_t* a, GgmlType tb, const uint8_t* b, int64_t n_in,
                    int64_t n_rows) {
  const uint64_t ra = *fish::ggml_row_bytes(uint32_t(ta), n_in), rb = *fish::ggml_row_bytes(uint32_t(tb), n_in);
  std::atomic<int64_t> next{0};
  std::mutex mu;
  double num = 0, den = 0;
  pool.run([&](int, int) {
    std::vector<float> x(static_cast<size_t>(n_in)), y(static_cast<size_t>(n_in));
    double n = 0, d = 0;
    for (int64_t r = next.fetch_add(1); r < n_rows; r = next.fetch_add(1)) {
      fish::dequant_row(ta, a + uint64_t(r) * ra, x.data(), n_in);
      fish::dequant_row(tb, b + uint64_t(r) * rb, y.data(), n_in);
      for (int64_t i = 0; i < n_in; ++i) {
        const double e = double(x[size_t(i)]) - double(y[size_t(i)]);
        n += e * e;
        d += double(x[size_t(i)]) * double(x[size_t(i)]);
      }
    }
    std::lock_guard<std::mutex> lk(mu);
    num += n;
    den += d;
  });
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct PairSummary {
  int n = 0, stacks = 0;
  double min = INFINITY, max = 0, sum = 0;
  int64_t weights = 0;
  double seconds = 0;
};

}  // namespace

extern "C" {

FISH_API int32_t fish_test_gpu_requant(const char* model_path, int32_t mode_in,
                                       void (*fn)(const fish_plugin_check*, void*), void* ctx, fish_error** err) {
  int32_t failures = -1;
  fish::capi::guarded(err, [&] {
    if (mode_in < -1 || mode_in > int32_t(RequantMode::Auto))
      throw fish::Error("fish_test_gpu_requant: mode " + std::to_string(mode_in) + " is not -1, 0, 1, 2, 3 or 4 (auto)");
    const RequantMode mode = mode_in < 0 ? fish::EngineConfig::process().gpu_requant : RequantMode(mode_in);
    failures = 0;
    if (mode == RequantMode::Off) return;
    fish::ComputeBackend* be = fish::backend::get();
    if (!be) throw fish::Error("no compute backend: " + fish::backend::reason());
    auto file = fish::gguf::File::open(model_path);
    auto emit = [&](const std::string& name, const std::string& detail, int outcome) {
      if (outcome == FISH_CHECK_FAIL) ++failures;
      if (!fn) return;
      fish_plugin_check pc{};
      pc.struct_size = sizeof pc;
      pc.name = name.c_str();
      pc.outcome = outcome;
      pc.detail = detail.c_str();
      fn(&pc, ctx);
    };
    const auto emit_check = [&](const fish::capi::GpuCheck& c) {
      // check_gpu_weight counts its own failures (returned below)
      if (!fn) return;
      fish_plugin_check pc{};
      pc.struct_size = sizeof pc;
      pc.name = c.name.c_str();
      pc.outcome = c.outcome;
      pc.detail = c.detail.c_str();
      fn(&pc, ctx);
    };
    const bool tied = file->tensor("output.weight") == nullptr;
    // auto: every conversion any mode makes (which one a load picks depends on the device's memory).
    const std::vector<RequantMode> modes = mode == RequantMode::Auto
                                               ? std::vector<RequantMode>{RequantMode::AllFq3, RequantMode::ToQ4K}
                                               : std::vector<RequantMode>{mode};
    fish::ThreadPool pool(0);
    std::mt19937_64 rng(4321);
    std::map<std::string, PairSummary> pairs;
    std::vector<uint8_t> bytes;
    for (const auto& t : file->tensors()) {
      // Matrices, and expert stacks (3-D: n_expert matrices whose rows follow
      // one another, converted row by row as the load converts them).
      if (t.n_dims != 2 && t.n_dims != 3) continue;
      const bool output = t.name == "output.weight" || (tied && t.name == "token_embd.weight");
      if (!output && !layer_matrix(t.name)) continue;
      std::vector<GgmlType> targets;
      for (RequantMode m : modes) {
        const GgmlType to = fish::requant_target(m, t.type, output);
        if (to != t.type && std::find(targets.begin(), targets.end(), to) == targets.end()) targets.push_back(to);
      }
      for (GgmlType to : targets) {
        const int64_t n_in = t.ne[0], n_rows = t.n_rows();
        const std::string pair = fish::ggml_type_name(t.type) + "->" + fish::ggml_type_name(to);
        const std::string base = "requant " + t.name + " " + pair + " [" +
                                 (t.n_dims == 3 ? std::to_string(t.ne[2]) + "x" : std::string()) +
                                 std::to_string(t.ne[1]) + "x" + std::to_string(n_in) + "]";
        bytes.resize(size_t(*fish::ggml_row_bytes(uint32_t(to), n_in) * uint64_t(n_rows)));
        const auto t0 = std::chrono::steady_clock::now();
        try {
          fish::requant_rows(pool, t.type, t.data, t.row_bytes(), to, bytes.data(), n_in, n_rows);
        } catch (const fish::Error& e) {
          emit(base, std::string("cannot be converted: ") + e.what(), FISH_CHECK_FAIL);
          continue;
        }
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double rel = relative_rms(pool, t.type, t.data, to, bytes.data(), n_in, n_rows);
        const double bound = to == GgmlType::FQ3 ? 0.20 : 0.10;
        char buf[160];
        std::snprintf(buf, sizeof buf, "relative RMS %.2f%% vs the GGUF's values (failed past %.0f%%)", rel * 100,
                      bound * 100);
        emit(base, buf, rel <= bound ? FISH_CHECK_PASS : FISH_CHECK_FAIL);
        PairSummary& s = pairs[pair];
        ++s.n;
        s.stacks += t.n_dims == 3;
        s.min = std::min(s.min, rel);
        s.max = std::max(s.max, rel);
        s.sum += rel;
        s.weights += n_in * n_rows;
        s.seconds += secs;
        if (t.name.rfind("blk.0.", 0) != 0) continue;
        if (!be->supports(to)) {
          emit("requant kernel " + t.name + " " + pair,
               be->name() + " does not take " + fish::ggml_type_name(to) + " weights (the mode falls back there)",
               FISH_CHECK_SKIP);
          continue;
        }
        // A stack: its first expert's matrix (matmul takes single matrices;
        // the span's expert kernels have their own tests).
        const int64_t n_out = t.ne[1];
        const uint64_t mat_bytes = bytes.size() / uint64_t(n_rows / n_out);
        failures += fish::capi::check_gpu_weight(*be, pool,
                                                 "requant kernel " + t.name + (t.n_dims == 3 ? "[0] " : " ") + pair,
                                                 t.name.c_str(), to, bytes.data(), mat_bytes, n_in, n_out, rng,
                                                 emit_check);
      }
    }
    for (const auto& [pair, s] : pairs) {
      char buf[256];
      // A stack counts as one (its n_expert matrices converted together).
      const std::string stacks = s.stacks ? "; " + std::to_string(s.stacks) + " of them expert stacks" : "";
      std::snprintf(buf, sizeof buf,
                    "%d matrices, relative RMS %.2f-%.2f%% (mean %.2f%%); converted at %.2f ns/weight on %d threads%s",
                    s.n, s.min * 100, s.max * 100, s.sum / s.n * 100, s.seconds * 1e9 / double(s.weights),
                    pool.size(), stacks.c_str());
      emit("requant " + pair + " (FISH_GPU_REQUANT=" + fish::requant_mode_name(mode) + ")", buf, FISH_CHECK_PASS);
    }
    if (pairs.empty())
      emit(std::string("requant (FISH_GPU_REQUANT=") + fish::requant_mode_name(mode) + ")",
           "the model has no matrix this mode converts", FISH_CHECK_SKIP);
  });
  return failures;
}

}  // extern "C"
