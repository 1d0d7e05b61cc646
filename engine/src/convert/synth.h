// fish synth: a random-weight GGUF with exactly a real model's shapes, metadata
// keys and tensor names (see synth_shape.h), in any of the formats of
// type_mix.h. Weights are generated and quantised in parallel, chunk by chunk,
// and streamed to the file: memory stays at a few chunks whatever the model size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "gguf/gguf_writer.h"

namespace fish::convert {

struct SynthOptions {
  std::string shape;   // one of synth_shape_ids(): "tiny", "llama-1b", "qwen3-30b-a3b", ...
  std::string type;    // "F32", "F16", "Q8_0", "Q4_0", "Q4_K_M"
  std::string out;     // written as OUT.tmp, then renamed
  uint64_t seed = 0;   // same seed, same bytes (for any thread count)
  int n_threads = 0;   // <= 0: one per physical core
  gguf::Writer::Progress progress;  // optional: tensor bytes written so far, of all
};

struct SynthTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
};

struct SynthSummary {
  uint64_t file_bytes = 0;  // exact size of the file
  int64_t n_params = 0;
  std::vector<SynthTensor> tensors;  // in file order
  // One line per tensor whose row length did not fit the format's type (what it
  // got instead: type_mix.h), e.g. Qwen2.5 0.5B's 896-wide rows in Q4_K_M.
  std::vector<std::string> notes;
};

// Writes the model. Throws fish::Error for an unknown shape or type, or when the
// file cannot be written (OUT is then untouched).
SynthSummary synth_model(const SynthOptions& o);

// Just the metadata synth_model writes for shape/type (tests inspect the real
// shapes' keys without generating their weights). Throws for an unknown shape/type.
void synth_metadata(gguf::Writer& w, const std::string& shape, const std::string& type, uint64_t seed);

// What synth_model would write (tensor names, types, shapes, exact file size)
// without generating a single weight; o.out is not used.
SynthSummary plan_synth(const SynthOptions& o);

}  // namespace fish::convert
