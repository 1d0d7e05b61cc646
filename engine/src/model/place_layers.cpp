// GPU placement (spec: "What runs where"): output projection first, then the
// last layers backwards while upload() succeeds, trusting bytes_resident()
// deltas rather than file sizes. With spans, the span's KV + arena are reserved
// before any layer is placed, a span declined for its size is retried with
// fewer layers (one the plugin does not implement leaves the layers per
// matmul), and span layers get no CPU KV. Pages of uploaded tensors go back to the OS.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/backend_access.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "quant/quant.h"

namespace fish {

namespace {

constexpr int32_t kSpanKvInitial = 512;  // positions of device KV a span starts with

// A layer's single matrices (those absent in its kind of FFN have no tensor:
// upload and release skip them). Experts are Layer::*_exps, placed apart.
constexpr int kLayerMatrices = 11;
Linear* layer_matrices(Layer& L, int i) {
  Linear* m[kLayerMatrices] = {&L.wq,     &L.wk,         &L.wv,       &L.wo,      &L.gate,      &L.up,
                               &L.down,   &L.router,     &L.gate_shexp, &L.up_shexp, &L.down_shexp};
  return m[i];
}

// The matrix of a layer that plays `role` (null for a vector role).
Linear* layer_matrix(Layer& L, TensorRole role) {
  switch (role) {
    case TensorRole::AttnQ: return &L.wq;
    case TensorRole::AttnK: return &L.wk;
    case TensorRole::AttnV: return &L.wv;
    case TensorRole::AttnOut: return &L.wo;
    case TensorRole::FfnGate: return &L.gate;
    case TensorRole::FfnUp: return &L.up;
    case TensorRole::FfnDown: return &L.down;
    case TensorRole::FfnRouter: return &L.router;
    case TensorRole::FfnGateShexp: return &L.gate_shexp;
    case TensorRole::FfnUpShexp: return &L.up_shexp;
    case TensorRole::FfnDownShexp: return &L.down_shexp;
    default: return nullptr;
  }
}

// A layer of the model as a span sees it: its tensors by role. Matrices carry
// their backend copies (null until uploaded), vectors point at the model's f32.
// An MoE layer has the router and its three expert stacks (each one weight of
// n_mat = n_expert) instead of the dense FFN, and qwen2moe's shared expert.
SpanLayer span_layer(Layer& L, const Hparams& h) {
  SpanLayer sl;
  auto vec = [&](TensorRole r, const float* data, int64_t n) {
    if (data) sl.tensors.push_back(SpanTensor{r, nullptr, data, n});
  };
  auto mat = [&](TensorRole r) { sl.tensors.push_back(SpanTensor{r, layer_matrix(L, r)->gpu, nullptr, 0}); };
  vec(TensorRole::AttnNorm, L.attn_norm, h.n_embd);
  mat(TensorRole::AttnQ);
  mat(TensorRole::AttnK);
  mat(TensorRole::AttnV);
  mat(TensorRole::AttnOut);
  vec(TensorRole::AttnQBias, L.bq, h.q_dim());
  vec(TensorRole::AttnKBias, L.bk, h.kv_dim());
  vec(TensorRole::AttnVBias, L.bv, h.kv_dim());
  vec(TensorRole::AttnQNorm, L.q_norm, h.head_dim);
  vec(TensorRole::AttnKNorm, L.k_norm, h.head_dim);
  vec(TensorRole::FfnNorm, L.ffn_norm, h.n_embd);
  if (h.moe()) {
    mat(TensorRole::FfnRouter);
    sl.tensors.push_back(SpanTensor{TensorRole::FfnGateExps, L.gate_exps.gpu, nullptr, 0});
    sl.tensors.push_back(SpanTensor{TensorRole::FfnUpExps, L.up_exps.gpu, nullptr, 0});
    sl.tensors.push_back(SpanTensor{TensorRole::FfnDownExps, L.down_exps.gpu, nullptr, 0});
    if (L.gate_shexp.tensor) {
      mat(TensorRole::FfnGateShexp);
      mat(TensorRole::FfnUpShexp);
      mat(TensorRole::FfnDownShexp);
      vec(TensorRole::FfnShexpGate, L.shexp_gate, h.n_embd);
    }
    return sl;
  }
  mat(TensorRole::FfnGate);
  mat(TensorRole::FfnUp);
  mat(TensorRole::FfnDown);
  return sl;
}

// The weights of a span tensor of layer L (its current backend copy).
BackendWeight* span_weight(Layer& L, TensorRole role) {
  switch (role) {
    case TensorRole::FfnGateExps: return L.gate_exps.gpu;
    case TensorRole::FfnUpExps: return L.up_exps.gpu;
    case TensorRole::FfnDownExps: return L.down_exps.gpu;
    default: {
      Linear* m = layer_matrix(L, role);
      return m ? m->gpu : nullptr;
    }
  }
}

}  // namespace

void LlamaModel::place_layers(const ModelOptions& opt) {
  int32_t want = opt.gpu_layers >= 0 ? opt.gpu_layers : cfg_.gpu_layers >= 0 ? cfg_.gpu_layers : hp_.n_layer;
  want = std::max(0, std::min(want, hp_.n_layer));
  // CPU only (FISH_GPU=off in this load's configuration, or no layer wanted):
  // no plugin is even loaded.
  if (cfg_.gpu_off || (want == 0 && (opt.gpu_layers == 0 || cfg_.gpu_layers == 0))) return;
  span_fail_at_ = cfg_.test_span_fail_at;
  span_fail_dev_ = cfg_.test_span_fail_device;
  gpu_verbose_ = opt.verbose || cfg_.gpu_verbose > 0;
  // One backend per listed device (FISH_GPU_DEVICE=0,1; the same index twice:
  // two logical devices), each with its budget (FISH_VRAM_BUDGET_MB=a,b).
  std::string why;
  std::vector<int> used;  // each backend's device index
  const std::vector<ComputeBackend*> bes = acquire_backends(cfg_.gpu_devices, cfg_.vram_budget_mb, &why, &used);
  if (!why.empty()) throw Error(why);
  if (bes.empty()) return;
  // Re-quantised device copies (requant.h): this load's mode (auto is
  // resolved on the first device placed, once its span's reserve is known);
  // the converter is made on the first conversion.
  requant_mode_ = opt.gpu_requant >= 0 && opt.gpu_requant <= int32_t(RequantMode::Auto) ? RequantMode(opt.gpu_requant)
                                                                                        : cfg_.gpu_requant;
  requant_mix_ = {};
  requant_stats_ = {};
  span_head_ = false;
  span_head_all_rows_ = true;
  std::unique_ptr<Requantizer> requant;
  if (bes.size() == 1) {
    DevicePart d;
    d.be = bes[0];
    d.device = used[0];
    d.first = hp_.n_layer - want;
    d.end = hp_.n_layer;
    place_on_device(opt, d, true, requant);
    parts_.push_back(d);
  } else {
    place_devices(opt, bes, used, want, requant);
  }
  // 5. What the conversions cost.
  if (requant) {
    requant_stats_ = requant->stats();
    const RequantStats& st = requant_stats_;
    const std::string dir = requant->cache_dir();
    const std::string rebuilt = st.rejected ? " (" + std::to_string(st.rejected) + " bad entries rebuilt)" : "";
    char cost[160] = "";
    if (st.converted)
      std::snprintf(cost, sizeof cost, " in %.2f s (%.2f ns/weight, %d threads)", st.convert_seconds,
                    st.ns_per_weight(), st.threads);
    std::fprintf(stderr, "fish: re-quantised for %s (FISH_GPU_REQUANT=%s): %s; %d converted%s, %d read from the cache%s%s%s\n",
                 bes[0]->name().c_str(), requant_mode_name(requant_mode_),
                 requant_mix_.entries.empty() ? "nothing placed" : requant_mix_.str().c_str(), st.converted, cost,
                 st.cached, rebuilt.c_str(), dir.empty() ? "" : " ", dir.c_str());
  }
  // The parts with nothing on their device are dropped; backend() is the first one's.
  std::vector<DevicePart> kept;
  for (const DevicePart& d : parts_)
    if (d.n_gpu > 0 || output_.gpu_be == d.be) kept.push_back(d);
  parts_ = std::move(kept);
  backend_ = parts_.empty() ? nullptr : parts_[0].be;
}

int32_t LlamaModel::gpu_layers() const {
  int32_t n = 0;
  for (const DevicePart& d : parts_) n += d.n_gpu;
  return n;
}

bool LlamaModel::gpu_span() const {
  for (const DevicePart& d : parts_)
    if (d.span) return true;
  return false;
}

int32_t LlamaModel::span_layers() const {
  int32_t n = 0;
  for (const DevicePart& d : parts_)
    if (d.span) n += d.end - d.span_first;
  return n;
}

void LlamaModel::place_on_device(const ModelOptions& opt, DevicePart& part, bool with_output,
                                 std::unique_ptr<Requantizer>& requant) {
  ComputeBackend* be = part.be;
  const int32_t want = part.end - part.first;  // the layers given to this device: [first, end)
  const bool span_wanted = opt.gpu_span >= 0 ? opt.gpu_span != 0 : cfg_.gpu_span;
  const uint64_t resident0 = be->bytes_resident();

  // The types the backend takes, asked once each.
  std::map<GgmlType, bool> supported;
  auto supports = [&](GgmlType t) {
    auto it = supported.find(t);
    if (it == supported.end()) it = supported.emplace(t, be->supports(t)).first;
    return it->second;
  };
  auto release_linear = [&](Linear& lin) {
    if (lin.gpu) be->release(lin.gpu);
    lin.gpu = nullptr;
    lin.gpu_be = nullptr;
  };
  // The converter, made on the first conversion.
  auto converter = [&]() -> Requantizer& {
    if (!requant)
      requant = std::make_unique<Requantizer>(*file_, *pool_, cfg_.gpu_requant_cache, "",
                                              [](const std::string& m) { std::fprintf(stderr, "fish: warning: %s\n", m.c_str()); },
                                              gpu_verbose_);
    return *requant;
  };
  // output: the output projection (never made 3-bit, requant_target).
  auto upload = [&](Linear& lin, bool& ok, bool output) {
    if (!ok || !lin.tensor) return;
    const GgmlType from = lin.tensor->type;
    GgmlType to = requant_device_type(requant_mode_, from, output, supports);
    WeightDesc d;
    d.name = lin.tensor->name.c_str();
    d.type = from;
    d.n_in = lin.cpu.n_in;
    d.n_out = lin.cpu.n_out;
    d.data = lin.tensor->data;  // GGUF bytes (cpu may be repacked)
    d.nbytes = lin.tensor->nbytes;
    if (to != from) {
      if (const std::vector<uint8_t>* bytes = converter().convert(*lin.tensor, to)) {
        d.type = to;
        d.data = bytes->data();
        d.nbytes = bytes->size();
      } else {
        to = from;  // could not be converted (warned): the GGUF bytes, if the backend takes them
      }
    }
    if (to == from && !supports(from)) {
      ok = false;
      return;
    }
    lin.gpu = be->upload(d);
    lin.gpu_be = lin.gpu ? be : nullptr;
    lin.gpu_type = d.type;
    lin.gpu_bytes = d.nbytes;
    ok = lin.gpu != nullptr;
  };

  // Layers whose every matrix the backend can hold qualify for a span. The
  // candidates' description is built once: span_bytes sizes suffixes of it
  // before anything is uploaded (weights null), and the span is created from
  // the suffix that was placed, its weights filled in.
  bool span_ok = span_wanted && be->has_spans() && want > 0;
  std::vector<SpanLayer> span_layers;  // layers first .. end - 1
  SpanDesc sd;
  sd.n_embd = hp_.n_embd;
  sd.n_head = hp_.n_head;
  sd.n_head_kv = hp_.n_head_kv;
  sd.head_dim = hp_.head_dim;
  sd.n_ff = hp_.moe() ? 0 : hp_.n_ff;
  // The device KV starts small and grows on demand (grow_span_kv before each
  // forward) instead of taking n_ctx positions up front.
  sd.n_ctx = std::min(n_ctx_, kSpanKvInitial);
  sd.n_seq = kv_.n_seq();  // a plugin holding fewer refuses the span: those layers run per matmul
  sd.arch.norm = NormType::Rms;
  sd.arch.norm_eps = hp_.rms_eps;
  sd.arch.activation = Activation::Silu;
  sd.arch.rope = hp_.rope_type;
  sd.arch.n_rot = hp_.n_rot;
  sd.arch.rope_freq_base = hp_.rope_freq_base;
  sd.arch.rope_freq_scale = hp_.rope_freq_scale;
  sd.arch.rope_freqs = rope_freqs_;
  if (hp_.moe()) {
    sd.arch.n_expert = hp_.n_expert;
    sd.arch.n_expert_used = hp_.n_expert_used;
    sd.arch.gating = hp_.gating == MoeGating::SoftmaxTopK ? Gating::SoftmaxTopK : Gating::SoftmaxTopKNorm;
    sd.arch.n_ff_expert = hp_.n_ff_expert;
    sd.arch.n_ff_shexp = hp_.n_ff_shexp;
  }
  if (span_ok)
    for (int32_t l = part.first; l < part.end; ++l) span_layers.push_back(span_layer(layers_[size_t(l)], hp_));
  auto last_layers = [&](int32_t k) {  // the span of this device's last k layers
    SpanDesc d = sd;
    d.first_layer = part.end - k;
    d.layers = std::span<const SpanLayer>(span_layers).last(size_t(k));
    return d;
  };
  // What a span of k layers needs beyond its weights (KV for its initial
  // positions + arena + params): kept free while layers are placed.
  std::vector<uint64_t> reserve_for(size_t(want) + 1, 0);
  if (span_ok)
    for (int32_t k = 1; k <= want; ++k) reserve_for[size_t(k)] = be->span_bytes(last_layers(k));
  auto fits_reserve = [&](int32_t k) { return be->memory_free() >= reserve_for[size_t(k)]; };

  const int32_t n_cpu_moe = opt.n_cpu_moe >= 0 ? std::min(opt.n_cpu_moe, hp_.n_layer) : 0;
  bool experts_on_device = span_ok && hp_.moe();
  if (requant_mode_ == RequantMode::Auto)
    requant_mode_ = choose_requant_auto(be, part.end, want, experts_on_device ? std::max(n_cpu_moe, part.first) : part.end,
                                        reserve_for, supports);
  if ((requant_mode_ == RequantMode::AllFq3 || requant_mode_ == RequantMode::Mixed) && !supports(GgmlType::FQ3))
    std::fprintf(stderr,
                 "fish: warning: %s does not take FQ3 weights (plugin ABI 2.1): FISH_GPU_REQUANT=%s leaves Q4_K "
                 "as it is and turns only Q6_K / Q5_K into Q4_K\n",
                 be->name().c_str(), requant_mode_name(requant_mode_));

  // 1. The output projection (if a one-layer span would still fit beside it).
  if (with_output) {
    bool ok = true;
    upload(output_, ok, true);
    if (!ok || !fits_reserve(want > 0 ? 1 : 0)) release_linear(output_);
  }
  // 2. Layers from the last backwards while upload() succeeds and the span of
  // that many layers still has its reserve free (live memory_free(), i.e. the
  // bytes_resident() growth of each upload, not file sizes).
  // MoE: a layer's expert stacks go to the backend only for the span (matmul
  // takes no stacks). From the last layer back while they fit (and past
  // n_cpu_moe); once a layer's do not, every earlier layer keeps its experts in
  // host memory and runs per matmul: the first layers' experts go to the host first.
  auto release_experts = [&](Layer& L) {
    for (Experts* ex : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
      if (ex->gpu) be->release(ex->gpu);
      ex->gpu = nullptr;
      ex->gpu_be = nullptr;
    }
  };
  // A stack goes up as one weight of n_mat = n_expert, re-quantised under the
  // mode's rules like any matrix of the layer (requant_device_type): its rows
  // are n_expert matrices' rows one after another, so converting the stack's
  // rows converts each expert, and the converted stack is again n_expert
  // matrices one after another (one cache entry per stack).
  // The bytes of a stack as type `to` (the stack's own type: as it is), one
  // after another: the file's, the converter's, or (an older file's experts
  // apart in the file) gathered into staging, each expert converted as its
  // own tensor (one cache entry per expert). Sets type to what it is (the
  // file's type where a conversion failed, warned).
  std::vector<uint8_t> staging;
  auto stack_bytes = [&](const Experts& ex, GgmlType& to) -> const uint8_t* {
    const gguf::TensorInfo* t = ex.tensor;
    if (ex.parts.empty()) {
      if (to == t->type) return t->data;
      if (const std::vector<uint8_t>* b = converter().convert(*t, to)) return b->data();
      to = t->type;
      return t->data;
    }
    const auto row = ggml_row_bytes(uint32_t(to), t->ne[0]);
    const uint64_t per = row ? *row * uint64_t(t->ne[1]) : 0;
    staging.resize(size_t(per * ex.parts.size()));
    for (size_t e = 0; e < ex.parts.size() && to != t->type; ++e) {
      const std::vector<uint8_t>* b = converter().convert(*ex.parts[e], to);
      if (!b) to = t->type;  // gathered as they are below
      else std::copy(b->begin(), b->end(), staging.begin() + ptrdiff_t(e * per));
    }
    if (to == t->type) {
      staging.resize(size_t(t->nbytes));
      for (size_t e = 0; e < ex.parts.size(); ++e)
        std::copy(ex.parts[e]->data, ex.parts[e]->data + ex.parts[e]->nbytes,
                  staging.begin() + ptrdiff_t(e * ex.parts[0]->nbytes));
    }
    return staging.data();
  };
  auto stack_nbytes = [](const Experts& ex, GgmlType to) {
    return *ggml_row_bytes(uint32_t(to), ex.tensor->ne[0]) * uint64_t(ex.tensor->n_rows());
  };
  // Gives the file's pages of a stack (or of its parts) back to the OS.
  auto release_stack_pages = [&](const Experts& ex) {
    if (ex.parts.empty()) file_->release_pages(ex.tensor->data, ex.tensor->nbytes);
    for (const gguf::TensorInfo* pt : ex.parts) file_->release_pages(pt->data, pt->nbytes);
  };
  auto upload_experts = [&](Layer& L) {
    bool ok = true;
    for (Experts* ex : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
      const gguf::TensorInfo* t = ex->tensor;
      WeightDesc d;
      d.name = t->name.c_str();
      d.n_in = t->ne[0];
      d.n_out = t->ne[1];
      d.n_mat = t->ne[2];
      GgmlType to = requant_device_type(requant_mode_, t->type, false, supports);
      d.data = stack_bytes(*ex, to);
      d.type = to;
      d.nbytes = stack_nbytes(*ex, to);
      if (!supports(d.type)) {
        ok = false;
        break;
      }
      ex->gpu = be->upload(d);
      ex->gpu_be = ex->gpu ? be : nullptr;
      ex->gpu_type = d.type;
      ex->gpu_bytes = d.nbytes;
      ok = ex->gpu != nullptr;
      if (!ok) break;
    }
    if (!ok) release_experts(L);
    return ok;
  };

  int32_t placed = 0;
  const std::string uploading =
      (requant_mode_ != RequantMode::Off ? "re-quantising and uploading to " : "uploading to ") + be->name();
  for (int32_t l = part.end - 1; l >= part.first; --l) {
    report(uploading.c_str(), double(placed) / double(want));
    Layer& L = layers_[size_t(l)];
    bool ok = true;
    for (int i = 0; i < kLayerMatrices; ++i) upload(*layer_matrices(L, i), ok, false);
    if (ok && experts_on_device && (l < n_cpu_moe || !upload_experts(L) || !fits_reserve(placed + 1))) {
      release_experts(L);
      experts_on_device = false;
      if (gpu_verbose_ && l >= n_cpu_moe)
        std::fprintf(stderr, "fish: the experts of layers 0..%d stay in host memory (no room on %s)\n", l,
                     be->name().c_str());
    }
    if (ok && !fits_reserve(placed + 1)) ok = false;
    if (!ok) {
      for (int i = 0; i < kLayerMatrices; ++i) release_linear(*layer_matrices(L, i));
      release_experts(L);
      break;
    }
    ++placed;
  }
  part.n_gpu = placed;
  // The span: the last layers whose every matrix is on the backend (an MoE
  // layer's experts included); the GPU layers before it run per matmul.
  int32_t& span_first = part.span_first;
  span_first = part.end - part.n_gpu;
  if (hp_.moe())
    while (span_first < part.end && !layers_[size_t(span_first)].gate_exps.gpu) ++span_first;

  // 3. The span, retried with fewer layers when declined.
  if (span_ok) {
    for (int32_t l = span_first; l < part.end; ++l)
      for (SpanTensor& t : span_layers[size_t(l - part.first)].tensors)
        if (!t.data) t.weight = span_weight(layers_[size_t(l)], t.role);
    while (span_first < part.end) {
      const SpanDesc d = last_layers(part.end - span_first);
      part.span = be->span_create(d);
      if (part.span) {
        part.kv_cap = d.n_ctx;
        break;
      }
      if (gpu_verbose_)
        std::fprintf(stderr, "fish: span of %d layers declined: %s\n", part.end - span_first,
                     be->last_error().c_str());
      // Not implemented (a role, a value, a feature): fewer layers would be
      // refused alike; the placed layers run per matmul instead (an MoE
      // layer's experts back in host memory: matmul takes no stacks).
      if (be->last_status() == ComputeBackend::kUnsupported) {
        for (int32_t l = span_first; l < part.end; ++l) release_experts(layers_[size_t(l)]);
        span_first = part.end;
        break;
      }
      Layer& L = layers_[size_t(span_first)];
      if (hp_.moe()) {  // its experts to the host: the layer runs per matmul
        release_experts(L);
        ++span_first;
        continue;
      }
      for (int i = 0; i < kLayerMatrices; ++i) release_linear(*layer_matrices(L, i));
      --part.n_gpu;
      ++span_first;
    }
  }
  for (int32_t l = span_first; l < part.end; ++l)
    if (part.span) kv_.set_layer_on_cpu(l, false);
  // FISH_TEST_REQUANT_HOST_EXPERTS (tests): the GPU layers whose experts the
  // CPU multiplies get, as their CPU experts, F32 copies of the values the
  // span would hold (the mode's converted stack, decoded: exact), so that
  // test-gpu's per-matmul run holds the span run's weights and multiplies
  // them with f32 activations (quantised experts would take int8 ones, whose
  // rounding flips near-tie routing decisions of a random tiny model).
  if (cfg_.test_requant_host_experts && hp_.moe())
    for (int32_t l = part.end - part.n_gpu; l < span_first; ++l)
      for (Experts* ex : {&layers_[size_t(l)].gate_exps, &layers_[size_t(l)].up_exps, &layers_[size_t(l)].down_exps}) {
        const gguf::TensorInfo* t = ex->tensor;
        GgmlType type = requant_device_type(requant_mode_, t->type, false, supports);
        const uint8_t* src = stack_bytes(*ex, type);
        const int64_t n_in = t->ne[0], n_out = t->ne[1], n_rows = t->n_rows();
        const uint64_t row = *ggml_row_bytes(uint32_t(type), n_in);
        host_expert_bytes_.emplace_back(size_t(n_rows * n_in) * sizeof(float));
        float* f = reinterpret_cast<float*>(host_expert_bytes_.back().data());
        pool_->parallel_for(n_rows, 16, [&](int64_t b, int64_t e, int) {
          for (int64_t r = b; r < e; ++r) dequant_row(type, src + uint64_t(r) * row, f + r * n_in, n_in);
        });
        for (size_t e = 0; e < ex->cpu.size(); ++e)
          ex->cpu[e] = WeightView{GgmlType::F32, f + int64_t(e) * n_out * n_in, n_in, n_out,
                                  uint64_t(n_in) * sizeof(float)};
      }
  // The output norm + projection in the span's own forward (FISH_GPU_SPAN_HEAD=0:
  // x comes back and the head is a second submission, through matmul): the
  // span that ends the model, when the output projection is on its device.
  if (part.span && part.end == hp_.n_layer && output_.gpu && output_.gpu_be == be && cfg_.gpu_span_head) {
    span_head_ = be->span_set_head(part.span, output_.gpu, output_norm_);
    if (!span_head_ && gpu_verbose_)
      std::fprintf(stderr, "fish: output head stays a separate submission: %s\n", be->last_error().c_str());
  }
  // The head's logits read where the backend left them, not copied per token;
  // FISH_GPU_LOGITS_VIEW=0 copies them.
  span_view_ = span_head_ && cfg_.gpu_logits_view;

  // 4. The CPU no longer reads the uploaded weights: give their pages back.
  auto drop_pages = [&](const Linear& lin) {
    if (lin.gpu && lin.tensor && lin.tensor != tok_embd_) file_->release_pages(lin.tensor->data, lin.tensor->nbytes);
  };
  if (with_output) drop_pages(output_);
  for (int32_t l = part.end - part.n_gpu; l < part.end; ++l) {
    Layer& L = layers_[size_t(l)];
    for (int i = 0; i < kLayerMatrices; ++i) drop_pages(*layer_matrices(L, i));
    for (Experts* ex : {&L.gate_exps, &L.up_exps, &L.down_exps})
      if (ex->gpu) release_stack_pages(*ex);
  }

  // 5. What the placed weights became (the conversions' cost: place_layers).
  auto count_mix = [&](const Linear& lin) {
    if (lin.gpu && lin.tensor && lin.gpu_type != lin.tensor->type)
      requant_mix_.add(lin.tensor->type, lin.gpu_type, lin.tensor->nbytes, lin.gpu_bytes);
  };
  if (with_output) count_mix(output_);
  for (int32_t l = part.end - part.n_gpu; l < part.end; ++l) {
    Layer& L = layers_[size_t(l)];
    for (int i = 0; i < kLayerMatrices; ++i) count_mix(*layer_matrices(L, i));
    for (const Experts* ex : {&L.gate_exps, &L.up_exps, &L.down_exps})
      if (ex->gpu && ex->gpu_type != ex->tensor->type)
        requant_mix_.add(ex->tensor->type, ex->gpu_type, ex->tensor->nbytes, ex->gpu_bytes, ex->tensor->ne[2]);
  }

  if (gpu_verbose_) {
    // One device: "vulkan"; several: "vulkan device 1 (layers 14-27)".
    std::string name = be->name();
    if (!part_label_.empty()) name += part_label_;
    const bool has_output = output_.gpu && output_.gpu_be == be;
    const int32_t gpu_first = part.end - part.n_gpu;
    std::fprintf(stderr, "fish: %s: %d of %d layers%s%s, %.0f MB resident; %s\n", name.c_str(), part.n_gpu,
                 part_label_.empty() ? hp_.n_layer : want,
                 has_output ? (span_head_ ? " + output (in the span)" : " + output") : "",
                 part.span ? (span_first > gpu_first
                                  ? (" (" + std::to_string(part.end - span_first) + " as one span, " +
                                     std::to_string(span_first - gpu_first) +
                                     " per matmul with their experts in host memory)").c_str()
                                  : " as one span")
                           : " per matmul",
                 double(be->bytes_resident() - resident0) / 1e6, detail_of(be).c_str());
  }
}

void LlamaModel::release_part(DevicePart& d) {
  own_logits();
  ComputeBackend* be = d.be;
  if (d.span) be->span_destroy(d.span);
  d.span = nullptr;
  auto rel = [&](Linear& lin) {
    if (lin.gpu && lin.gpu_be == be) {
      be->release(lin.gpu);
      lin.gpu = nullptr;
      lin.gpu_be = nullptr;
    }
  };
  if (output_.gpu_be == be) {  // the head goes with its device
    rel(output_);
    span_head_ = span_view_ = false;
    span_head_all_rows_ = true;
  }
  for (int32_t l = d.first; l < d.end; ++l) {
    Layer& L = layers_[size_t(l)];
    for (int i = 0; i < kLayerMatrices; ++i) rel(*layer_matrices(L, i));
    for (Experts* ex : {&L.gate_exps, &L.up_exps, &L.down_exps})
      if (ex->gpu && ex->gpu_be == be) {
        be->release(ex->gpu);
        ex->gpu = nullptr;
        ex->gpu_be = nullptr;
      }
  }
  d.n_gpu = 0;
  d.span_first = d.end;
}

void LlamaModel::release_backend() {
  for (DevicePart& d : parts_) release_part(d);
  parts_.clear();
  span_head_ = span_view_ = false;
  span_head_all_rows_ = true;
  requant_mix_ = {};
  backend_ = nullptr;
}

void LlamaModel::fall_back_to_cpu(const char* what, const std::string& why) {
  ++stats_.gpu_fallbacks;
  const std::string reason = !why.empty() ? why : backend_ ? backend_->last_error() : std::string();
  std::fprintf(stderr, "fish: %s failed on %s (%s); continuing on the CPU\n", what,
               backend_ ? backend_->name().c_str() : "the backend", reason.c_str());
  int32_t replay_end = 0;  // the spans' layers have no CPU KV
  for (const DevicePart& d : parts_)
    if (d.span) {
      for (int32_t l = d.span_first; l < d.end; ++l) kv_.set_layer_on_cpu(l, true);
      replay_end = d.end;
    }
  release_backend();
  prepare_cpu_weights();  // the layers now on the CPU get the CPU's layout
  kv_replay_end_ = std::max(kv_replay_end_, replay_end);
}

void LlamaModel::fall_back_part(size_t k, const char* what, const std::string& why) {
  DevicePart& d = parts_[k];
  if (parts_.size() == 1) return fall_back_to_cpu(what, why);  // one device: the CPU takes everything
  ++stats_.gpu_fallbacks;
  std::fprintf(stderr, "fish: %s failed on %s device %d (layers %d-%d) (%s); its layers continue on the CPU\n", what,
               d.be->name().c_str(), d.device, d.first, d.end - 1, why.c_str());
  if (d.span) {
    for (int32_t l = d.span_first; l < d.end; ++l) kv_.set_layer_on_cpu(l, true);
    kv_replay_end_ = std::max(kv_replay_end_, d.end);
  }
  release_part(d);
  prepare_cpu_weights();
  // What is left on the devices: the first part holding something is backend().
  std::vector<DevicePart> kept;
  for (const DevicePart& p : parts_)
    if (p.n_gpu > 0 || output_.gpu_be == p.be) kept.push_back(p);
  parts_ = std::move(kept);
  backend_ = parts_.empty() ? nullptr : parts_[0].be;
}

std::string LlamaModel::detail_of(ComputeBackend* be) const {
  std::string s = be->describe();
  if (!requant_mix_.entries.empty())
    s += std::string("; re-quantised (FISH_GPU_REQUANT=") + requant_mode_name(requant_mode_) + "): " + requant_mix_.str();
  return s;
}

std::string LlamaModel::gpu_detail() const {
  if (parts_.empty()) return "";
  if (parts_.size() == 1) return detail_of(parts_[0].be);
  // Several devices: each one's line, with the layers it holds.
  std::string s;
  for (const DevicePart& d : parts_) {
    if (!s.empty()) s += " | ";
    s += "device " + std::to_string(d.device) + " layers " + std::to_string(d.end - d.n_gpu) + "-" +
         std::to_string(d.end - 1) + ": " + d.be->describe();
  }
  if (!requant_mix_.entries.empty())
    s += std::string("; re-quantised (FISH_GPU_REQUANT=") + requant_mode_name(requant_mode_) + "): " + requant_mix_.str();
  return s;
}

}  // namespace fish
