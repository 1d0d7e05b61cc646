// The tools part of the C API: fish_describe_file (fish info), fish_quantize_file
// (fish quantize) and fish_synth_file (fish synth), over engine/src/convert.
#include <cstdio>
#include <string>

#include "capi/capi_util.h"
#include "convert/describe.h"
#include "convert/quantize_model.h"
#include "convert/synth.h"

using fish::capi::guarded;
using fish::capi::set_error;

extern "C" {

FISH_API char* fish_describe_file(const char* path, fish_error** err) {
  if (!path) {
    set_error(err, "fish_describe_file: no path");
    return nullptr;
  }
  std::string text;
  if (!guarded(err, [&] { text = fish::convert::describe_file(path); })) return nullptr;
  char* out = fish::capi::dup_string(text);
  if (!out) set_error(err, "fish_describe_file: out of memory");
  return out;
}

FISH_API int fish_quantize_file(const char* in, const char* out, const char* type, int n_threads, fish_error** err) {
  if (!in || !out || !type) {
    set_error(err, "fish_quantize_file: input, output and type are required");
    return 1;
  }
  // Tensors that cannot take the type are reported on stderr as they are met
  // (the quantisation goes on; they keep a fitting type).
  const bool ok = guarded(err, [&] {
    fish::convert::quantize_model(in, out, type, n_threads, [](const std::string& msg) {
      std::fprintf(stderr, "fish quantize: %s\n", msg.c_str());
    });
  });
  return ok ? 0 : 1;
}

FISH_API int fish_synth_file(const char* shape, const char* type, const char* out, uint64_t seed, int n_threads,
                             fish_error** err) {
  return fish_synth_file_progress(shape, type, out, seed, n_threads, nullptr, nullptr, err);
}

FISH_API int fish_synth_file_progress(const char* shape, const char* type, const char* out, uint64_t seed,
                                      int n_threads, fish_progress_fn progress, void* user, fish_error** err) {
  if (!shape || !type || !out) {
    set_error(err, "fish_synth_file: shape, type and output are required");
    return 1;
  }
  fish::convert::SynthOptions o;
  o.shape = shape;
  o.type = type;
  o.out = out;
  o.seed = seed;
  o.n_threads = n_threads;
  if (progress)
    o.progress = [progress, user](uint64_t done, uint64_t total) {
      progress(user, "synthesising", total ? float(double(done) / double(total)) : 1.0f);
    };
  return guarded(err, [&] {
    const auto sum = fish::convert::synth_model(o);
    // Tensors that could not take the type (one line, they share a cause).
    if (!sum.notes.empty())
      std::fprintf(stderr, "fish synth: %s%s\n", sum.notes[0].c_str(),
                   sum.notes.size() > 1 ? (" (and " + std::to_string(sum.notes.size() - 1) + " more tensors)").c_str()
                                        : "");
  }) ? 0 : 1;
}

}  // extern "C"
