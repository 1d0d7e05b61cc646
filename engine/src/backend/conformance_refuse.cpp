// Conformance suite: what a plugin does not implement it refuses at
// span_create with FISH_E_UNSUPPORTED and a message naming it, allocating
// nothing (the host then runs those layers itself): an unknown tensor role,
// unknown values of the architecture block, and MoE layers (a router and
// stacked experts) in a plugin without MoE (one with MoE passes that check:
// conformance_moe.cpp tests its results).
#include <algorithm>
#include <cctype>

#include "backend/conformance_synth.h"
#include "backend/host_services.h"

namespace fish::backend::conf {

namespace {

constexpr int kCtx = 32;

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void run_refusal_checks(Runner& run, const PluginLibrary* lib, const std::string& name) {
  std::mt19937_64 rng(run.seed() + 41);
  Variant v = span_variants()[0];
  v.n_layers = 1;
  std::unique_ptr<PluginBackend> be;
  Synth s;
  std::string setup_fail, setup_skip;
  try {
    be = new_backend(lib, name);
    if (!be->supports(GgmlType::F32)) setup_skip = "F32 is not supported";
    else {
      s = make_synth(v, rng);
      upload_synth(*be, s);
    }
  } catch (const CheckFail& f) {
    setup_fail = f.detail;
  }
  // span_create(d) must fail with FISH_E_UNSUPPORTED, allocate nothing, and
  // name one of `names`. may_accept: a plugin implementing it passes with that
  // note (other checks test what it computes).
  auto refused = [&](const SpanDesc& d, const std::string& what, const std::vector<std::string>& names,
                     const char* may_accept = nullptr) {
    const uint64_t before = be->bytes_resident();
    if (BackendSpan* sp = be->span_create(d)) {
      be->span_destroy(sp);
      if (may_accept) return std::string(may_accept);
      fail(what + " was accepted");
    }
    const std::string msg = be->last_error();
    expect(be->last_status() == FISH_E_UNSUPPORTED,
           what + ": status " + std::string(status_name(be->last_status())) + ", expected unsupported (" + msg + ")");
    const bool named = std::any_of(names.begin(), names.end(), [&](const std::string& n) { return lower(msg).find(n) != std::string::npos; });
    expect(named, what + ": the message does not name it: \"" + msg + "\"");
    expect(be->bytes_resident() == before, what + ": the refusal left " + std::to_string(be->bytes_resident() - before) +
                                               " bytes allocated");
    return "\"" + msg + "\"";
  };
  auto check = [&](const std::string& what, auto&& body) {
    run.check("span refuses " + what, [&]() -> std::string {
      expect(setup_fail.empty(), setup_fail);
      if (!setup_skip.empty()) skip(setup_skip);
      return body();
    });
  };

  check("an unknown tensor role", [&]() -> std::string {
    std::vector<SpanLayer> layers = s.desc;
    layers[0].tensors.push_back(SpanTensor{TensorRole(999), nullptr, s.head_norm.data(), v.n_embd});
    SpanDesc d = span_desc(s, kCtx, 1);
    d.layers = layers;
    return refused(d, "a layer with tensor role 999", {"999"});
  });

  check("unknown architecture values", [&]() -> std::string {
    SpanDesc d = span_desc(s, kCtx, 1);
    d.arch.rope = RopeType(77);
    const std::string a = refused(d, "RoPE kind 77", {"77"});
    d = span_desc(s, kCtx, 1);
    d.arch.norm = NormType(41);
    refused(d, "norm kind 41", {"41"});
    d = span_desc(s, kCtx, 1);
    d.arch.activation = Activation(53);
    refused(d, "activation 53", {"53"});
    return a + "; norm 41 and activation 53 refused too";
  });

  check("MoE layers it does not run", [&]() -> std::string {
    constexpr int kExperts = 4, kFfExpert = 32;
    const int E = v.n_embd;
    // Experts as GGUF stores them: n_mat matrices one after another.
    const TestWeight gate = make_weight(GgmlType::F32, kExperts * kFfExpert, E, 0.2f, rng, "blk.0.ffn_gate_exps.weight");
    const TestWeight up = make_weight(GgmlType::F32, kExperts * kFfExpert, E, 0.2f, rng, "blk.0.ffn_up_exps.weight");
    const TestWeight down = make_weight(GgmlType::F32, kExperts * E, kFfExpert, 0.2f, rng, "blk.0.ffn_down_exps.weight");
    const TestWeight router = make_weight(GgmlType::F32, kExperts, E, 0.2f, rng, "blk.0.ffn_gate_inp.weight");
    std::vector<BackendWeight*> held;
    struct Release {
      PluginBackend& be;
      std::vector<BackendWeight*>& held;
      ~Release() {
        for (BackendWeight* w : held) be.release(w);
      }
    } release{*be, held};
    std::string note;
    auto stacked = [&](const TestWeight& w, int64_t n_out) {
      WeightDesc d = desc_of(w);
      d.n_out = n_out;
      d.n_mat = kExperts;
      BackendWeight* h = be->upload(d);
      if (!h) {
        // A plugin that takes no stacked matrices refuses them as unsupported; the
        // span is then described with single matrices in their place (it must
        // still be refused for what it is).
        expect(be->last_status() == FISH_E_UNSUPPORTED,
               "upload of " + w.name + " (n_mat " + std::to_string(kExperts) + ") failed with " +
                   status_name(be->last_status()) + " (" + be->last_error() +
                   "); a plugin that does not take stacked matrices refuses them as unsupported");
        note = "; stacked experts refused at upload: \"" + be->last_error() + "\"";
        d.n_mat = 1;
        d.nbytes /= kExperts;
        h = be->upload(d);
        expect(h != nullptr, "upload of one expert of " + w.name + ": " + be->last_error());
      }
      held.push_back(h);
      return h;
    };
    BackendWeight* hg = stacked(gate, kFfExpert);
    BackendWeight* hu = stacked(up, kFfExpert);
    BackendWeight* hd = stacked(down, E);
    BackendWeight* hr = be->upload(desc_of(router));
    expect(hr != nullptr, "upload " + router.name + ": " + be->last_error());
    held.push_back(hr);

    std::vector<SpanLayer> layers(1);
    for (const SpanTensor& t : s.desc[0].tensors)  // the attention and the norms stay
      if (t.role != TensorRole::FfnGate && t.role != TensorRole::FfnUp && t.role != TensorRole::FfnDown)
        layers[0].tensors.push_back(t);
    layers[0].tensors.push_back(SpanTensor{TensorRole::FfnRouter, hr, nullptr, 0});
    layers[0].tensors.push_back(SpanTensor{TensorRole::FfnGateExps, hg, nullptr, 0});
    layers[0].tensors.push_back(SpanTensor{TensorRole::FfnUpExps, hu, nullptr, 0});
    layers[0].tensors.push_back(SpanTensor{TensorRole::FfnDownExps, hd, nullptr, 0});
    SpanDesc d = span_desc(s, kCtx, 1);
    d.n_ff = 0;
    d.arch.n_expert = kExperts;
    d.arch.n_expert_used = 2;
    d.arch.gating = Gating::SoftmaxTopKNorm;
    d.arch.n_ff_expert = kFfExpert;
    d.layers = layers;
    return refused(d, "a MoE layer (4 experts, 2 used)", {"moe", "expert", "router", "15", "16", "17", "18"},
                   "accepted: the plugin runs MoE layers (the moe checks test them)") +
           note;
  });

  if (be && setup_fail.empty() && setup_skip.empty()) release_synth(*be, s);
}

}  // namespace fish::backend::conf
