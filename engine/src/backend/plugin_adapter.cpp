#include "backend/plugin_adapter.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "backend/host_services.h"

namespace fish::backend {

namespace {

fish_weight* W(BackendWeight* w) { return reinterpret_cast<fish_weight*>(w); }
fish_span* S(BackendSpan* s) { return reinterpret_cast<fish_span*>(s); }

// The C++ enums carry the ABI's numbers, so converting is a cast.
static_assert(uint32_t(TensorRole::AttnNorm) == FISH_ROLE_ATTN_NORM && uint32_t(TensorRole::AttnOut) == FISH_ROLE_ATTN_OUT &&
              uint32_t(TensorRole::AttnKNorm) == FISH_ROLE_ATTN_K_NORM && uint32_t(TensorRole::FfnDown) == FISH_ROLE_FFN_DOWN &&
              uint32_t(TensorRole::FfnRouter) == FISH_ROLE_FFN_ROUTER &&
              uint32_t(TensorRole::FfnShexpGate) == FISH_ROLE_FFN_SHEXP_GATE);
static_assert(uint32_t(RopeType::Normal) == FISH_ROPE_NORMAL && uint32_t(RopeType::NeoX) == FISH_ROPE_NEOX);
static_assert(uint32_t(NormType::Rms) == FISH_NORM_RMS && uint32_t(Activation::Silu) == FISH_ACT_SILU);
static_assert(uint32_t(Gating::SoftmaxTopK) == FISH_GATING_SOFTMAX_TOPK &&
              uint32_t(Gating::SoftmaxTopKNorm) == FISH_GATING_SOFTMAX_TOPK_NORM);

static_assert(ComputeBackend::kUnsupported == FISH_E_UNSUPPORTED);

// The table slots FISH_BACKEND_FAIL can name.
constexpr const char* kCallNames[] = {"describe", "open", "memory_free", "bytes_resident", "supports", "upload",
                                      "release", "matmul", "matmul_group", "span_bytes", "span_create",
                                      "span_destroy", "span_set_head", "span_forward", "span_kv_len",
                                      "span_kv_truncate", "span_kv_copy", "span_kv_reserve"};

}  // namespace

AbiSpanDesc::AbiSpanDesc(const SpanDesc& d) {
  const SpanArch& a = d.arch;
  arch.struct_size = sizeof arch;
  arch.norm = uint32_t(a.norm);
  arch.norm_eps = a.norm_eps;
  arch.activation = uint32_t(a.activation);
  arch.rope = uint32_t(a.rope);
  arch.n_rot = a.n_rot;
  arch.rope_freq_base = a.rope_freq_base;
  arch.rope_freq_scale = a.rope_freq_scale;
  arch.rope_freqs = a.rope_freqs;
  arch.attn_scale = a.attn_scale;
  arch.n_expert = a.n_expert;
  arch.n_expert_used = a.n_expert_used;
  arch.gating = uint32_t(a.gating);
  arch.n_ff_expert = a.n_ff_expert;
  arch.n_ff_shexp = a.n_ff_shexp;

  size_t n_tensors = 0;
  for (const SpanLayer& l : d.layers) n_tensors += l.tensors.size();
  tensors.reserve(n_tensors);  // no reallocation: layers point into it
  layers.reserve(d.layers.size());
  for (const SpanLayer& l : d.layers) {
    fish_span_layer fl{};
    fl.struct_size = sizeof fl;
    fl.n_tensors = uint32_t(l.tensors.size());
    fl.tensors = tensors.data() + tensors.size();
    for (const SpanTensor& t : l.tensors) {
      fish_layer_tensor ft{};
      ft.struct_size = sizeof ft;
      ft.role = uint32_t(t.role);
      ft.weight = W(t.weight);
      ft.data = t.data;
      ft.n = t.n;
      tensors.push_back(ft);
    }
    layers.push_back(fl);
  }

  desc.struct_size = sizeof desc;
  desc.first_layer = d.first_layer;
  desc.n_layers = d.n_layers();
  desc.n_embd = d.n_embd;
  desc.n_head = d.n_head;
  desc.n_head_kv = d.n_head_kv;
  desc.head_dim = d.head_dim;
  desc.n_ff = d.n_ff;
  desc.n_ctx = d.n_ctx;
  desc.n_seq = d.n_seq;
  desc.arch = &arch;
  desc.layers = layers.data();
}

PluginBackend::PluginBackend(const PluginLibrary* lib, fish_backend* b, std::string name)
    : lib_(lib), b_(b), name_(std::move(name)) {}

PluginBackend::~PluginBackend() {
  if (!b_) return;
  try {
    api().backend_destroy(b_);
  } catch (...) {
  }
}

std::unique_ptr<PluginBackend> PluginBackend::create(const PluginLibrary* lib, const std::string& name,
                                                     const fish_backend_config& cfg, std::string* err) {
  fish_backend* b = nullptr;
  fish_status st = FISH_E_INTERNAL;
  try {
    st = lib->api.backend_create(&cfg, &b);
  } catch (...) {
    st = FISH_E_INTERNAL;
  }
  if (st != FISH_OK || !b) {
    if (err) {
      std::string why;
      try {
        const char* m = lib->api.plugin_error();
        why = m ? m : "";
      } catch (...) {
      }
      *err = std::string("backend_create failed (") + status_name(st) + ")" + (why.empty() ? "" : ": " + why);
    }
    return nullptr;
  }
  return std::make_unique<PluginBackend>(lib, b, name);
}

bool PluginBackend::set_fail_spec(const std::string& spec, std::string* err) {
  std::lock_guard<std::mutex> lk(mu_);
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string call_name = item.substr(0, colon);
    long n = 1;
    if (colon != std::string::npos) {
      char* end = nullptr;
      n = std::strtol(item.c_str() + colon + 1, &end, 10);
      if (!end || *end || n < 1) {
        if (err) *err = "FISH_BACKEND_FAIL: '" + item + "': the count must be an integer >= 1";
        return false;
      }
    }
    bool known = false;
    for (const char* c : kCallNames) known = known || call_name == c;
    if (!known) {
      if (err) *err = "FISH_BACKEND_FAIL: unknown call '" + call_name + "'";
      return false;
    }
    fail_at_[call_name] = n;
  }
  return true;
}

template <class F>
bool PluginBackend::call(const char* what, F&& f) {
  auto it = fail_at_.find(what);
  if (it != fail_at_.end()) {
    if (it->second <= 1) {
      last_status_ = FISH_E_DEVICE;
      last_error_ = std::string(what) + ": forced failure (FISH_BACKEND_FAIL)";
      host_log(FISH_LOG_INFO, name_, last_error_);
      return false;
    }
    --it->second;
  }
  fish_status st;
  try {
    st = f();
  } catch (...) {
    last_status_ = FISH_E_INTERNAL;
    last_error_ = std::string(what) + ": the plugin let an exception cross the ABI boundary";
    return false;
  }
  if (st == FISH_OK) return true;
  last_status_ = st;
  std::string msg;
  try {
    const char* m = api().last_error(b_);
    msg = m ? m : "";
  } catch (...) {
  }
  last_error_ = std::string(what) + " failed (" + status_name(st) + ")" + (msg.empty() ? "" : ": " + msg);
  // Visible with FISH_GPU_VERBOSE=1: why placement stopped, why a span fell back.
  host_log(FISH_LOG_INFO, name_, last_error_);
  return false;
}

bool PluginBackend::require(bool has, const char* what, const char* feature) {
  if (has) return true;
  last_status_ = FISH_E_UNSUPPORTED;
  last_error_ = std::string(what) + ": the " + name_ + " plugin has no " + feature;
  return false;
}

std::string PluginBackend::last_error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return last_error_;
}

int PluginBackend::last_status() const {
  std::lock_guard<std::mutex> lk(mu_);
  return last_status_;
}

std::string PluginBackend::describe_what(uint32_t what) {
  std::lock_guard<std::mutex> lk(mu_);
  const char* out = nullptr;
  if (!call("describe", [&] { return api().describe(b_, what, &out); })) return "";
  return out ? std::string(out) : std::string();
}

std::string PluginBackend::describe() { return describe_what(FISH_DESCRIBE_SUMMARY); }

std::string PluginBackend::status() {
  std::string s = describe_what(FISH_DESCRIBE_STATUS);
  if (s.empty()) s = "failed: " + last_error();  // the plugin cannot even say how it is
  return s;
}

std::string PluginBackend::profile() { return describe_what(FISH_DESCRIBE_PROFILE); }

bool PluginBackend::open() {
  std::lock_guard<std::mutex> lk(mu_);
  return call("open", [&] { return api().open(b_); });
}

uint64_t PluginBackend::memory_free() {
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t v = 0;
  return call("memory_free", [&] { return api().memory_free(b_, &v); }) ? v : 0;
}

uint64_t PluginBackend::bytes_resident() {
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t v = 0;
  return call("bytes_resident", [&] { return api().bytes_resident(b_, &v); }) ? v : 0;
}

bool PluginBackend::supports(GgmlType t) {
  std::lock_guard<std::mutex> lk(mu_);
  int32_t v = 0;
  return call("supports", [&] { return api().supports(b_, uint32_t(t), &v); }) && v != 0;
}

BackendWeight* PluginBackend::upload(const WeightDesc& w) {
  std::lock_guard<std::mutex> lk(mu_);
  fish_weight_desc d{};
  d.struct_size = sizeof d;
  d.type = uint32_t(w.type);
  d.name = w.name ? w.name : "";
  d.n_in = w.n_in;
  d.n_out = w.n_out;
  d.n_mat = w.n_mat;
  d.data = w.data;
  d.nbytes = w.nbytes;
  fish_weight* out = nullptr;
  if (!call("upload", [&] { return api().upload(b_, &d, &out); })) return nullptr;
  auto* h = reinterpret_cast<BackendWeight*>(out);
  rows_[h] = w.n_out;
  return h;
}

void PluginBackend::release(BackendWeight* w) {
  if (!w) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (call("release", [&] { return api().release(b_, W(w)); })) rows_.erase(w);
}

bool PluginBackend::matmul(BackendWeight* w, const float* x, int n_tok, float* y) {
  std::lock_guard<std::mutex> lk(mu_);
  return call("matmul", [&] { return api().matmul(b_, W(w), x, int32_t(n_tok), y); });
}

bool PluginBackend::matmul_group(BackendWeight* const* ws, int n_w, const float* x, int n_tok, float* const* ys) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<fish_weight*> fw(size_t(n_w > 0 ? n_w : 0));
  for (size_t i = 0; i < fw.size(); ++i) fw[i] = W(ws[i]);
  return call("matmul_group", [&] { return api().matmul_group(b_, fw.data(), int32_t(n_w), x, int32_t(n_tok), ys); });
}

// ---- spans -------------------------------------------------------------------

bool PluginBackend::has_spans() const {
  const fish_plugin_api* a = &api();
  return FISH_API_HAS(a, span_bytes) && FISH_API_HAS(a, span_create) && FISH_API_HAS(a, span_destroy) &&
         FISH_API_HAS(a, span_set_head) && FISH_API_HAS(a, span_forward) && FISH_API_HAS(a, span_kv_len) &&
         FISH_API_HAS(a, span_kv_truncate) && FISH_API_HAS(a, span_kv_reserve);
}

bool PluginBackend::has_span_kv_copy() const {
  const fish_plugin_api* a = &api();
  return has_spans() && FISH_API_HAS(a, span_kv_copy);
}

uint64_t PluginBackend::span_bytes(const SpanDesc& d) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_spans(), "span_bytes", "span support")) return 0;
  const AbiSpanDesc a(d);
  uint64_t v = 0;
  return call("span_bytes", [&] { return api().span_bytes(b_, &a.desc, &v); }) ? v : 0;
}

BackendSpan* PluginBackend::span_create(const SpanDesc& d) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_spans(), "span_create", "span support")) return nullptr;
  const AbiSpanDesc a(d);
  fish_span* out = nullptr;
  if (!call("span_create", [&] { return api().span_create(b_, &a.desc, &out); })) return nullptr;
  auto* s = reinterpret_cast<BackendSpan*>(out);
  spans_[s].n_embd = d.n_embd;
  return s;
}

void PluginBackend::span_destroy(BackendSpan* s) {
  if (!s) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (call("span_destroy", [&] { return api().span_destroy(b_, S(s)); })) spans_.erase(s);
}

bool PluginBackend::span_set_head(BackendSpan* s, BackendWeight* head, const float* norm) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_spans(), "span_set_head", "span support")) return false;
  if (!call("span_set_head", [&] { return api().span_set_head(b_, S(s), W(head), norm); })) return false;
  auto r = rows_.find(head);
  spans_[s].n_vocab = head && r != rows_.end() ? r->second : 0;
  return true;
}

bool PluginBackend::forward_once_locked(BackendSpan* s, SpanBatch& b) {
  if (!require(has_spans(), "span_forward", "span support")) return false;
  fish_span_batch fb{};
  fb.struct_size = sizeof fb;
  fb.flags = (b.x_out ? uint32_t(FISH_FORWARD_X_OUT) : 0u) | (b.logits_view ? uint32_t(FISH_FORWARD_LOGITS_VIEW) : 0u);
  fb.n_tok = b.n_tok;
  fb.x = b.x;
  fb.seq = b.seq;
  fb.pos = b.pos;
  fb.logits_rows = b.logits_rows;
  fb.logits = b.logits;
  fb.logits_view = b.view;  // left as it was unless the plugin succeeds with a view
  if (!call("span_forward", [&] { return api().span_forward(b_, S(s), &fb); })) return false;
  if (b.logits_view) b.view = fb.logits_view;
  return true;
}

bool PluginBackend::span_forward_once(BackendSpan* s, SpanBatch& b) {
  std::lock_guard<std::mutex> lk(mu_);
  return forward_once_locked(s, b);
}

bool PluginBackend::span_forward(BackendSpan* s, SpanBatch& b) {
  std::lock_guard<std::mutex> lk(mu_);
  if (forward_once_locked(s, b)) return true;
  if (last_status_ != FISH_E_UNSUPPORTED || !b.seq || b.n_tok < 2) return false;
  const bool mixed = std::any_of(b.seq, b.seq + b.n_tok, [&](int32_t q) { return q != b.seq[0]; });
  auto info = spans_.find(s);
  if (!mixed || info == spans_.end()) return false;
  // The plugin runs one sequence per forward (ABI: the host then sends one forward per sequence).
  return forward_per_sequence(s, b, info->second);
}

bool PluginBackend::forward_per_sequence(BackendSpan* s, SpanBatch& b, SpanInfo& info) {
  const std::string refusal = last_error_;
  const int64_t E = info.n_embd, V = info.n_vocab;
  const int32_t n = b.n_tok;
  std::vector<int32_t> rank(size_t(n), -1);  // row -> index among the wanted logits rows
  int32_t n_wanted = 0;
  for (int32_t t = 0; t < n; ++t)
    if (b.logits_rows && b.logits_rows[t]) rank[size_t(t)] = n_wanted++;
  if (n_wanted > 0 && V <= 0) return false;  // cannot size the logits: keep the plugin's refusal

  // Results are gathered here and written to the caller's buffers only when every sequence ran.
  std::vector<float> x_all(b.x, b.x + size_t(n) * size_t(E));
  std::vector<float> lg_all(size_t(n_wanted) * size_t(V));
  std::vector<int32_t> seqs;  // in order of first appearance
  for (int32_t t = 0; t < n; ++t)
    if (std::find(seqs.begin(), seqs.end(), b.seq[t]) == seqs.end()) seqs.push_back(b.seq[t]);

  std::vector<float> x, lg;
  std::vector<int32_t> rows, pos, seq;
  std::vector<uint8_t> want;
  std::vector<std::pair<int32_t, int32_t>> ran;  // (sequence, its first position)
  for (const int32_t q : seqs) {
    rows.clear();
    for (int32_t t = 0; t < n; ++t)
      if (b.seq[t] == q) rows.push_back(t);
    const size_t m = rows.size();
    x.resize(m * size_t(E));
    pos.resize(m);
    seq.assign(m, q);
    want.resize(m);
    int32_t m_wanted = 0;
    for (size_t i = 0; i < m; ++i) {
      const int32_t t = rows[i];
      std::memcpy(&x[i * size_t(E)], &x_all[size_t(t) * size_t(E)], size_t(E) * sizeof(float));
      pos[i] = b.pos[t];
      want[i] = rank[size_t(t)] >= 0;
      m_wanted += want[i];
    }
    lg.resize(size_t(m_wanted) * size_t(V));
    SpanBatch sb;
    sb.n_tok = int32_t(m);
    sb.x = x.data();
    sb.seq = seq.data();
    sb.pos = pos.data();
    sb.logits_rows = m_wanted ? want.data() : nullptr;
    sb.logits = m_wanted ? lg.data() : nullptr;
    sb.x_out = b.x_out;
    if (!forward_once_locked(s, sb)) {
      // As one failed forward would: the sequences already run lose this batch's positions.
      for (const auto& [rq, p0] : ran)
        try {
          api().span_kv_truncate(b_, S(s), rq, p0);
        } catch (...) {
        }
      return false;
    }
    ran.emplace_back(q, pos[0]);
    for (size_t i = 0, k = 0; i < m; ++i) {
      const int32_t t = rows[i];
      if (b.x_out) std::memcpy(&x_all[size_t(t) * size_t(E)], &x[i * size_t(E)], size_t(E) * sizeof(float));
      if (want[i]) std::memcpy(&lg_all[size_t(rank[size_t(t)]) * size_t(V)], &lg[k++ * size_t(V)], size_t(V) * sizeof(float));
    }
  }
  if (b.x_out) std::copy(x_all.begin(), x_all.end(), b.x);
  if (n_wanted > 0) {
    if (b.logits_view) {
      info.split_view.swap(lg_all);
      b.view = info.split_view.data();
    } else {
      std::copy(lg_all.begin(), lg_all.end(), b.logits);
    }
  }
  host_log(FISH_LOG_DEBUG, name_, "span_forward: a batch of " + std::to_string(seqs.size()) +
                                      " sequences ran as one forward each (" + refusal + ")");
  last_status_ = FISH_OK;
  return true;
}

int PluginBackend::span_kv_len(BackendSpan* s, int32_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_spans(), "span_kv_len", "span support")) return -1;
  int32_t v = -1;
  return call("span_kv_len", [&] { return api().span_kv_len(b_, S(s), seq, &v); }) ? int(v) : -1;
}

bool PluginBackend::span_kv_truncate(BackendSpan* s, int32_t seq, int32_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_spans(), "span_kv_truncate", "span support")) return false;
  return call("span_kv_truncate", [&] { return api().span_kv_truncate(b_, S(s), seq, n); });
}

bool PluginBackend::span_kv_copy(BackendSpan* s, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_span_kv_copy(), "span_kv_copy", "span_kv_copy")) return false;
  return call("span_kv_copy", [&] { return api().span_kv_copy(b_, S(s), src, dst, p0, p1); });
}

bool PluginBackend::span_kv_reserve(BackendSpan* s, int32_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_spans(), "span_kv_reserve", "span support")) return false;
  return call("span_kv_reserve", [&] { return api().span_kv_reserve(b_, S(s), n); });
}

}  // namespace fish::backend
