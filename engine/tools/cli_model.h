// Shared by the sub-commands that load a model: the common flags (-m, -t, -c,
// --gpu-layers) and a loader that turns a failure into one clear line.
#pragma once
#include <sys/stat.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "args.h"
#include "fish/fish.h"
#include "progress.h"

namespace fish::cli {

struct ModelFlags {
  std::string path;
  fish_model_params params = fish_model_default_params();
  // --gpu-device / --tensor-split as given ("": not given); load_or_exit
  // points params.gpu_devices / tensor_split at them.
  std::string gpu_devices, tensor_split;
  fish_model_params load_params() const {
    fish_model_params p = params;
    if (!gpu_devices.empty()) p.gpu_devices = gpu_devices.c_str();
    if (!tensor_split.empty()) p.tensor_split = tensor_split.c_str();
    return p;
  }
};

// --gpu-device 0,1 and --tensor-split 3,1 (fish_model_params.gpu_devices /
// tensor_split): the text goes to the load as it is, whose parser judges it
// (FISH_GPU_DEVICE's and FISH_TENSOR_SPLIT's).
inline void device_flags(Args& a, std::string& devices, std::string& split) {
  if (a.value(nullptr, "--gpu-device", devices) && devices.empty()) a.fail("--gpu-device: an empty list");
  if (a.value({"-ts", "--tensor-split"}, split) && split.empty()) a.fail("--tensor-split: an empty list");
}

// The help lines of --gpu-device and --tensor-split, for each command's usage text.
constexpr const char* kDeviceHelp =
    "  --gpu-device I[,J...]: the GPUs to use, as fish devices numbers them (FISH_GPU_DEVICE); several:\n"
    "  the layers split across them, one span per device (0,0: one GPU opened as two logical devices).\n"
    "  -ts, --tensor-split A,B...: the layers' proportions per device (default: their free memory).\n";

// --requant MODE (fish_model_params.gpu_requant): 0|off, 1, 2, 3 or auto.
// False when not given (the environment's FISH_GPU_REQUANT then decides).
inline bool requant_flag(Args& a, int32_t& out) {
  std::string v;
  if (!a.value(nullptr, "--requant", v)) return false;
  if (v == "0" || v == "off") out = 0;
  else if (v == "1" || v == "2" || v == "3") out = v[0] - '0';
  else if (v == "auto") out = 4;
  else a.fail("--requant: '" + v + "' is not 0 (off), 1, 2, 3 or auto");
  return true;
}

// The help line of --requant, for each command's usage text.
constexpr const char* kRequantHelp =
    "  --requant MODE: smaller re-quantised weight copies on the GPU (FISH_GPU_REQUANT): 0 off, 1 K-quants\n"
    "  to FQ3 (3.5 bits), 2 Q6_K/Q5_K to Q4_K, 3 both of those, auto the mildest that fits every layer.\n";

// --n-cpu-moe N (fish_model_params.n_cpu_moe): MoE models keep the experts of
// their first N layers in host memory. False when not given (automatic).
inline bool n_cpu_moe_flag(Args& a, int32_t& out) {
  int64_t v = 0;
  if (!a.int_value(nullptr, "--n-cpu-moe", v)) return false;
  if (v < 0 || v > (1 << 20)) a.fail("--n-cpu-moe must be >= 0");
  out = int32_t(v);
  return true;
}

// The help line of --n-cpu-moe, for each command's usage text.
constexpr const char* kNCpuMoeHelp =
    "  --n-cpu-moe N: MoE models keep the experts of the first N layers in host memory (attention and\n"
    "  router still on the GPU); default: as many layers' experts on the GPU as fit, the first layers' on the host.\n";

// --batch-seqs N (fish embed) / --embeddings-seqs N (fish serve): how many
// sequences embedding inputs are packed over (fish_embed_params.n_seq, one
// input on each, their rows in one forward). False when not given.
inline bool embed_seqs_flag(Args& a, const char* name, int32_t& out) {
  int64_t v = 0;
  if (!a.int_value(nullptr, name, v)) return false;
  if (v < 1 || v > 256) a.fail(std::string(name) + " must be between 1 and 256");
  out = int32_t(v);
  return true;
}

inline ModelFlags parse_model_flags(Args& a, bool gpu_default_off = false) {
  ModelFlags f;
  if (!a.value("-m", "--model", f.path)) a.fail("missing -m MODEL");
  int64_t v = 0;
  if (a.int_value("-t", "--threads", v)) {
    if (v < 1 || v > 1024) a.fail("-t must be between 1 and 1024");
    f.params.n_threads = int32_t(v);
  }
  if (a.int_value("-c", "--ctx-size", v)) {
    if (v < 1 || v > (1 << 24)) a.fail("-c must be between 1 and 16777216");
    f.params.n_ctx = int32_t(v);
  }
  if (gpu_default_off) f.params.gpu_layers = 0;
  if (a.int_value({"-ngl", "--gpu-layers", "--n-gpu-layers"}, v)) {
    if (v < 0) a.fail("--gpu-layers must be >= 0");
    f.params.gpu_layers = int32_t(v);
  }
  if (a.flag(nullptr, "--verbose")) f.params.verbose = 1;
  requant_flag(a, f.params.gpu_requant);
  n_cpu_moe_flag(a, f.params.n_cpu_moe);
  device_flags(a, f.gpu_devices, f.tensor_split);
  return f;
}

// A text file's bytes for `flag` (-f), or exit 2 with one clear line: a
// missing file, a folder or a FIFO is not an empty text.
inline std::string read_text_file(Args& a, const char* flag, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) a.fail(std::string(flag) + " " + path + ": cannot open");
  if (!S_ISREG(st.st_mode)) a.fail(std::string(flag) + " " + path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  if (!in || (!(ss << in.rdbuf()) && st.st_size > 0)) a.fail(std::string(flag) + " " + path + ": cannot read");
  return ss.str();
}

// Loads the model; a load step that takes longer than a second (uploads,
// re-quantisation, repacking) shows its progress on stderr unless the caller
// set its own progress callback.
inline fish_model* load_or_exit(const char* cmd, const ModelFlags& f) {
  fish_error* err = nullptr;
  Progress progress(std::string("fish ") + cmd, /*show_after_s=*/1.0);
  fish_model_params p = f.load_params();
  if (!p.progress) {
    p.progress = &Progress::callback;
    p.progress_user = &progress;
  }
  fish_model* m = fish_model_load(f.path.c_str(), &p, &err);
  progress.finish();
  if (!m) {
    std::fprintf(stderr, "fish %s: %s\n", cmd, fish_error_message(err));
    fish_error_free(err);
    std::exit(1);
  }
  return m;
}

inline std::string piece(const fish_model* m, int32_t tok) {
  char buf[256];
  int32_t n = fish_token_to_piece(m, tok, buf, sizeof buf, 0);
  if (n < 0) {
    std::string s(size_t(-n), '\0');
    n = fish_token_to_piece(m, tok, s.data(), int32_t(s.size()), 0);
    return s.substr(0, size_t(n > 0 ? n : 0));
  }
  return std::string(buf, size_t(n));
}

inline std::vector<int32_t> tokenize_or_exit(const char* cmd, const fish_model* m, const std::string& text,
                                            bool add_special, bool parse_special) {
  std::vector<int32_t> ids(text.size() + 16);
  int32_t n = fish_tokenize(m, text.data(), text.size(), add_special, parse_special, ids.data(), int32_t(ids.size()));
  if (n < 0 && n != -INT32_MAX) {
    ids.resize(size_t(-n));
    n = fish_tokenize(m, text.data(), text.size(), add_special, parse_special, ids.data(), int32_t(ids.size()));
  }
  if (n < 0) {
    std::fprintf(stderr, "fish %s: tokenize failed: %s\n", cmd, fish_last_error(m));
    std::exit(1);
  }
  ids.resize(size_t(n));
  return ids;
}

}  // namespace fish::cli
