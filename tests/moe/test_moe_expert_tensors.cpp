// Older Mixtral GGUFs: each expert its own tensor ("blk.N.ffn_gate.E.weight",
// ffn_up.E, ffn_down.E; gguf/tensor_stack.h) instead of the stacked
// ffn_*_exps (issue 26). From fish synth tiny-mixtral Q4_K_M (stacked) the
// test writes two such files with gguf::Writer:
//   - "contiguous": each kind's experts one after another (gate.0 .. gate.7,
//     then up.*, down.*): the engine reads them as one stack without a copy
//     (stack_view over the file's bytes);
//   - "interleaved": per expert gate.E, down.E, up.E (the order of the old
//     converters, which wrote the checkpoint's experts.E.w1/w2/w3): not
//     contiguous, the CPU reads per-expert views and the upload gathers them.
// Both give the stacked file's logits bit for bit (every position of a
// prompt): on the CPU, and on the reference plugin's span with FISH_GPU_REQUANT
// 0 and 3 (stacks converted matrix by matrix: per expert for the interleaved
// file), the mix counting 12 stacks of 96 experts either way. A missing
// expert, a wrong shape, and experts of two types are refused, naming the tensor.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/engine_config.h"
#include "common/error.h"
#include "convert/synth.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/tensor_stack.h"
#include "model/llama_model.h"
#include "scratch_dir.h"

namespace fs = std::filesystem;
using fish::LlamaModel;
using fish::ModelOptions;

namespace {

const fs::path& scratch() { return fish::test::scratch_dir("fish-test-moe-experts"); }

std::string stacked() {
  const fs::path p = scratch() / "tiny-mixtral-Q4_K_M.gguf";
  if (!fs::exists(p)) {
    fish::convert::SynthOptions o;
    o.shape = "tiny-mixtral";
    o.type = "Q4_K_M";
    o.out = p.string();
    o.n_threads = 2;
    fish::convert::synth_model(o);
  }
  return p.string();
}

const char* const kKinds[] = {"ffn_gate", "ffn_up", "ffn_down"};

// The stacked file with each ffn_*_exps written as its experts' own tensors.
// interleaved: per expert gate, down, up (at the place of the layer's first
// stack); else each stack's experts in a row at the stack's place. edit may
// change a per-expert tensor's name, type, shape or bytes (bad-input cases).
using Edit = std::function<void(std::string& name, fish::GgmlType& type, std::vector<int64_t>& ne,
                                std::vector<uint8_t>& bytes)>;
std::string split(const std::string& name, bool interleaved, const Edit& edit = nullptr) {
  auto f = fish::gguf::File::open(stacked());
  fish::gguf::Writer w;
  for (auto& kv : f->kvs()) w.set_value(kv.key, kv.value);
  std::vector<std::vector<uint8_t>> keep;
  keep.reserve(f->tensors().size() * 8);
  auto add = [&](std::string n, fish::GgmlType type, std::vector<int64_t> ne, const uint8_t* data, uint64_t nbytes) {
    keep.emplace_back(data, data + nbytes);
    if (edit) edit(n, type, ne, keep.back());
    w.add_tensor(n, type, ne, keep.back().data());
  };
  auto expert = [&](const fish::gguf::TensorInfo& t, const std::string& p, const std::string& kind, int64_t e) {
    const uint64_t per = t.nbytes / uint64_t(t.ne[2]);
    add(fish::gguf::expert_tensor_name(p, kind, e), t.type, {t.ne[0], t.ne[1]}, t.data + uint64_t(e) * per, per);
  };
  for (auto& t : f->tensors()) {
    const size_t at = t.name.find("_exps.weight");
    if (at == std::string::npos) {
      add(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
      continue;
    }
    const std::string p = t.name.substr(0, t.name.find('.', 4) + 1);  // "blk.N."
    const std::string kind = t.name.substr(p.size(), at - p.size());
    if (!interleaved) {
      for (int64_t e = 0; e < t.ne[2]; ++e) expert(t, p, kind, e);
    } else if (kind == "ffn_gate") {  // the layer's first stack in synth's order
      for (int64_t e = 0; e < t.ne[2]; ++e)
        for (const char* k : {"ffn_gate", "ffn_down", "ffn_up"})
          expert(*f->tensor(p + k + "_exps.weight"), p, k, e);
    }
  }
  const std::string out = (scratch() / name).string();
  w.write(out);
  return out;
}

std::unique_ptr<LlamaModel> load(const std::string& path, int32_t gpu_layers, int32_t requant,
                                 const fish::EngineConfig* cfg = nullptr) {
  ModelOptions o;
  o.n_threads = 2;
  o.gpu_layers = gpu_layers;
  o.gpu_requant = requant;
  o.n_ctx = 64;
  o.config = cfg;
  return LlamaModel::load(path, o);
}

const std::vector<int32_t> kPrompt = {1, 517, 42, 3001, 9, 1234, 77, 2048, 5, 4000, 300, 12};

std::vector<float> all_logits(LlamaModel& m) {
  m.eval(kPrompt.data(), int32_t(kPrompt.size()), 0, true);
  std::vector<float> out;
  for (size_t t = 0; t < kPrompt.size(); ++t) {
    const float* l = m.logits(int32_t(t));
    out.insert(out.end(), l, l + m.hparams().n_vocab);
  }
  return out;
}

std::string refused(const std::string& path) {
  try {
    load(path, 0, 0);
  } catch (const fish::Error& e) {
    return e.what();
  }
  return "(loaded)";
}

}  // namespace

TEST_CASE("MoE: per-expert tensors of older Mixtral files == the stacked file", "[moe]") {
  const std::string contiguous = split("contiguous.gguf", false), interleaved = split("interleaved.gguf", true);
  // What the engine will see: one stack over the file's bytes, or parts.
  for (const auto& [path, one_stack] : {std::pair{contiguous, true}, std::pair{interleaved, false}}) {
    auto f = fish::gguf::File::open(path);
    for (const char* kind : kKinds) {
      std::vector<const fish::gguf::TensorInfo*> parts;
      for (int e = 0; e < 8; ++e) parts.push_back(f->tensor(fish::gguf::expert_tensor_name("blk.2.", kind, e)));
      REQUIRE(parts.back());
      CHECK(fish::gguf::stack_view(parts, "x").has_value() == one_stack);
    }
    CHECK_FALSE(f->tensor("blk.0.ffn_gate_exps.weight"));
  }
  // The CPU.
  const std::vector<float> ref = all_logits(*load(stacked(), 0, 0));
  for (const std::string& path : {contiguous, interleaved}) {
    INFO(path);
    CHECK(all_logits(*load(path, 0, 0)) == ref);
  }
  // The reference plugin's span, the stacks as they are and re-quantised
  // (mode 3: Q4_K stacks to FQ3, the Q6_K ones to Q4_K), the cache off.
  // The plugin probed in this process (a probe's forked child of a Catch
  // binary ends through Catch's handlers, which complain on stderr).
  std::string why;
  const fish::EngineConfig cfg =
      fish::EngineConfig::process().with("FISH_GPU_REQUANT_CACHE=0 FISH_PLUGIN_ISOLATE=0", &why);
  REQUIRE(why.empty());
  fish::backend::use_backend(FISH_TEST_REFERENCE, cfg);
  for (int32_t mode : {0, 3}) {
    auto s = load(stacked(), -1, mode, &cfg);
    REQUIRE(s->span_layers() == 4);
    const std::vector<float> gref = all_logits(*s);
    for (const std::string& path : {contiguous, interleaved}) {
      INFO(path << " mode " << mode);
      auto m = load(path, -1, mode, &cfg);
      CHECK(m->span_layers() == 4);
      CHECK(m->requant_detail() == s->requant_detail());
      if (mode == 3) {
        CHECK(m->requant_detail().find("(from 3.1; 10 expert stacks, 80 experts)") != std::string::npos);
        CHECK(m->requant_detail().find("2 expert stacks, 16 experts") != std::string::npos);
      }
      const std::vector<float> got = all_logits(*m);
      CHECK(got == gref);
    }
    std::printf("reference span, FISH_GPU_REQUANT=%d: contiguous and interleaved per-expert files == stacked, bit for "
                "bit over %zu logits (%s)\n",
                mode, gref.size(), s->requant_detail().c_str());
  }
}

TEST_CASE("MoE: bad per-expert tensors are refused, naming the tensor", "[moe]") {
  // Expert 5 of layer 1's up projection missing.
  std::string msg = refused(split("missing.gguf", true, [](std::string& n, auto&, auto&, auto&) {
    if (n == "blk.1.ffn_up.5.weight") n = "blk.1.ffn_up.9.weight";  // one past expert_count: also unexpected
  }));
  INFO(msg);
  CHECK(msg.find("tensor 'blk.1.ffn_up.5.weight' is missing (expert 5 of 8") != std::string::npos);
  // A wrong shape.
  msg = refused(split("shape.gguf", false, [](std::string& n, auto&, std::vector<int64_t>& ne, auto&) {
    if (n == "blk.3.ffn_down.2.weight") ne = {ne[0] * 2, ne[1] / 2};
  }));
  INFO(msg);
  CHECK(msg.find("tensor 'blk.3.ffn_down.2.weight' has shape [512, 128], expected [256, 256]") != std::string::npos);
  // Experts of one kind in two types (Q4_K rows of 256 re-declared Q8_0 over the same bytes' count).
  msg = refused(split("types.gguf", false, [](std::string& n, fish::GgmlType& type, std::vector<int64_t>& ne,
                                               std::vector<uint8_t>& bytes) {
    if (n == "blk.0.ffn_gate.3.weight") {
      type = fish::GgmlType::Q8_0;
      bytes.assign(size_t(ne[1]) * 272, 0);  // 256 values of Q8_0: 8 blocks of 34 bytes
    }
  }));
  INFO(msg);
  CHECK(msg.find("tensor 'blk.0.ffn_gate.3.weight' is Q8_0 but expert 0's is Q4_K") != std::string::npos);
}
