// Shared pieces of the conformance suite (conformance*.cpp): the check runner,
// synthetic weights of any GGUF type, and the spec's error bound.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/conformance.h"
#include "backend/plugin_adapter.h"
#include "backend/plugin_loader.h"
#include "common/ggml_type.h"

namespace fish::backend::conf {

// Thrown by a check body to fail / skip it with a message.
struct CheckFail {
  std::string detail;
};
struct CheckSkip {
  std::string detail;
};

class Runner {
 public:
  Runner(const ConformanceOptions& opts, ConformanceSummary& sum) : opts_(opts), sum_(sum) {}
  // Runs body() (which returns the PASS detail) unless filtered out; records the outcome.
  // chained: a step of a sequence whose later steps use its state (a span's
  // checks): filtered out, it still runs, unrecorded.
  template <class Body>
  void check(const std::string& name, Body&& body, bool chained = false);
  uint64_t seed() const { return opts_.seed; }

 private:
  void record(CheckResult r);
  const ConformanceOptions& opts_;
  ConformanceSummary& sum_;
};

[[noreturn]] inline void fail(const std::string& d) { throw CheckFail{d}; }
[[noreturn]] inline void skip(const std::string& d) { throw CheckSkip{d}; }
inline void expect(bool ok, const std::string& d) {
  if (!ok) fail(d);
}

// A weight matrix of a GGUF type with random contents: n_out rows of n_in.
struct TestWeight {
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0, n_out = 0;
  std::vector<uint8_t> bytes;  // GGUF layout
  std::vector<float> values;   // the same values decoded (dequant_row), [n_out, n_in]
  std::string name;
};

// Types the suite can make weights of: the host quantises random values into
// F32/F16/BF16/Q4_0/Q8_0/Q4_K/Q5_K/Q6_K; for Q4_1/Q5_0/Q5_1/Q2_K/Q3_K random
// blocks get sane scales written into them.
const std::vector<GgmlType>& test_types();
// Values uniform in [-scale, scale]; n_in a multiple of the type's block size.
TestWeight make_weight(GgmlType t, int64_t n_out, int64_t n_in, float scale, std::mt19937_64& rng,
                       const std::string& name);
std::vector<float> random_vector(size_t n, float scale, std::mt19937_64& rng);

// The spec's check of y [n_tok, n_out] against the f32 reference: every element
// of token t within 1e-3 * Σ_r Σ_i |w_ri||x_ti| / n_out. Returns the worst
// |err| / bound (<= 1 passes); *where names the worst element.
double bound_ratio(const TestWeight& w, const float* x, int n_tok, const float* y, std::string* where);
// matmul_ref_f32 over the weight's bytes.
std::vector<float> reference_product(const TestWeight& w, const float* x, int n_tok);

WeightDesc desc_of(const TestWeight& w);

std::string fmt(double v, int prec = 3);

// Parts of the suite (each adds its checks).
void run_matmul_checks(Runner& run, const PluginLibrary* lib, const std::string& name);
void run_span_checks(Runner& run, const PluginLibrary* lib, const std::string& name);      // conformance_span.cpp
void run_sequence_checks(Runner& run, const PluginLibrary* lib, const std::string& name);  // conformance_seq.cpp
void run_refusal_checks(Runner& run, const PluginLibrary* lib, const std::string& name);   // conformance_refuse.cpp
void run_moe_checks(Runner& run, const PluginLibrary* lib, const std::string& name);       // conformance_moe.cpp

// A fresh backend of the plugin (the suite never uses the engine's global one).
std::unique_ptr<PluginBackend> new_backend(const PluginLibrary* lib, const std::string& name, uint64_t budget = 0);

template <class Body>
void Runner::check(const std::string& name, Body&& body, bool chained) {
  if (!opts_.filter.empty() && name.find(opts_.filter) == std::string::npos) {
    if (chained) {
      try {
        body();
      } catch (...) {
      }
    }
    return;
  }
  CheckResult r;
  r.name = name;
  try {
    r.detail = body();
    r.outcome = CheckOutcome::Pass;
  } catch (const CheckFail& f) {
    r.outcome = CheckOutcome::Fail;
    r.detail = f.detail;
  } catch (const CheckSkip& s) {
    r.outcome = CheckOutcome::Skip;
    r.detail = s.detail;
  } catch (const std::exception& e) {
    r.outcome = CheckOutcome::Fail;
    r.detail = std::string("exception: ") + e.what();
  } catch (...) {
    r.outcome = CheckOutcome::Fail;
    r.detail = "unknown exception";
  }
  record(std::move(r));
}

}  // namespace fish::backend::conf
