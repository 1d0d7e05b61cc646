#include "backend/plugin_adapter.h"

#include <cstdlib>
#include <sstream>

#include "backend/host_services.h"

namespace fish::backend {

namespace {

fish_weight* W(BackendWeight* w) { return reinterpret_cast<fish_weight*>(w); }
fish_span* S(BackendSpan* s) { return reinterpret_cast<fish_span*>(s); }

constexpr const char* kCallNames[] = {"describe", "open", "memory_free", "bytes_resident", "supports", "upload",
                                      "release", "matmul", "matmul_group", "span_bytes", "span_create",
                                      "span_forward", "span_kv_truncate", "span_kv_reserve", "span_kv_len",
                                      "span_destroy", "span_set_head", "span_forward_logits",
                                      "span_forward_logits_view"};

}  // namespace

AbiSpanDesc::AbiSpanDesc(const SpanDesc& d) {
  desc.struct_size = sizeof desc;
  desc.first_layer = d.first_layer;
  desc.n_layers = d.n_layers;
  desc.n_embd = d.n_embd;
  desc.n_head = d.n_head;
  desc.n_head_kv = d.n_head_kv;
  desc.head_dim = d.head_dim;
  desc.n_ff = d.n_ff;
  desc.n_ctx = d.n_ctx;
  desc.rms_eps = d.rms_eps;
  desc.rope_type = d.rope_type == RopeType::NeoX ? FISH_ROPE_NEOX : FISH_ROPE_NORMAL;
  desc.n_rot = d.n_rot;
  desc.rope_freq_base = d.rope_freq_base;
  desc.rope_freq_scale = d.rope_freq_scale;
  desc.rope_freqs = d.rope_freqs;
  desc.attn_scale = d.attn_scale;
  layers.resize(d.layers.size());
  for (size_t i = 0; i < d.layers.size(); ++i) {
    const SpanLayerDesc& s = d.layers[i];
    fish_span_layer& l = layers[i];
    l.struct_size = sizeof l;
    l.wq = W(s.wq);
    l.wk = W(s.wk);
    l.wv = W(s.wv);
    l.wo = W(s.wo);
    l.w_gate = W(s.w_gate);
    l.w_up = W(s.w_up);
    l.w_down = W(s.w_down);
    l.attn_norm = s.attn_norm;
    l.ffn_norm = s.ffn_norm;
    l.bq = s.bq;
    l.bk = s.bk;
    l.bv = s.bv;
    l.q_norm = s.q_norm;
    l.k_norm = s.k_norm;
  }
  for (auto& l : layers) layer_ptrs.push_back(&l);
  desc.layers = layer_ptrs.data();
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
  // Caller holds mu_.
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
  d.data = w.data;
  d.nbytes = w.nbytes;
  fish_weight* out = nullptr;
  if (!call("upload", [&] { return api().upload(b_, &d, &out); })) return nullptr;
  return reinterpret_cast<BackendWeight*>(out);
}

void PluginBackend::release(BackendWeight* w) {
  if (!w) return;
  std::lock_guard<std::mutex> lk(mu_);
  call("release", [&] { return api().release(b_, W(w)); });
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

bool PluginBackend::has_spans() const {
  const fish_plugin_api& a = api();
  return FISH_STRUCT_HAS(&a, fish_plugin_api, span_destroy) && a.span_bytes && a.span_create && a.span_forward &&
         a.span_kv_truncate && a.span_kv_reserve && a.span_destroy;
}

uint64_t PluginBackend::span_bytes(const SpanDesc& d) {
  if (!has_spans()) return 0;
  std::lock_guard<std::mutex> lk(mu_);
  AbiSpanDesc a(d);
  uint64_t v = 0;
  return call("span_bytes", [&] { return api().span_bytes(b_, &a.desc, &v); }) ? v : 0;
}

BackendSpan* PluginBackend::span_create(const SpanDesc& d) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!has_spans()) {
    last_status_ = FISH_E_UNSUPPORTED;
    last_error_ = "span_create: the " + name_ + " plugin has no span support";
    return nullptr;
  }
  AbiSpanDesc a(d);
  fish_span* out = nullptr;
  if (!call("span_create", [&] { return api().span_create(b_, &a.desc, &out); })) return nullptr;
  return reinterpret_cast<BackendSpan*>(out);
}

bool PluginBackend::span_forward(BackendSpan* s, float* x, int n_tok, int pos0) {
  std::lock_guard<std::mutex> lk(mu_);
  return call("span_forward", [&] { return api().span_forward(b_, S(s), x, int32_t(n_tok), int32_t(pos0)); });
}

bool PluginBackend::has_span_head() const {
  // Appended in ABI 1.1: only with a negotiated minor >= 1 and a table that holds both.
  const fish_plugin_api& a = api();
  return FISH_ABI_VERSION_MINOR(a.abi_version) >= 1 && FISH_STRUCT_HAS(&a, fish_plugin_api, span_forward_logits) &&
         a.span_set_head && a.span_forward_logits;
}

bool PluginBackend::require(bool has, const char* what, const char* feature) {
  if (has) return true;
  last_status_ = FISH_E_UNSUPPORTED;
  last_error_ = std::string(what) + ": the " + name_ + " plugin has no " + feature;
  return false;
}

bool PluginBackend::span_set_head(BackendSpan* s, BackendWeight* head, const float* norm) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_span_head(), "span_set_head", "span head (plugin ABI 1.1)")) return false;
  return call("span_set_head", [&] { return api().span_set_head(b_, S(s), W(head), norm); });
}

bool PluginBackend::span_forward_logits(BackendSpan* s, float* x, int n_tok, int pos0, float* logits) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_span_head(), "span_forward_logits", "span head (plugin ABI 1.1)")) return false;
  return call("span_forward_logits",
              [&] { return api().span_forward_logits(b_, S(s), x, int32_t(n_tok), int32_t(pos0), logits); });
}

bool PluginBackend::has_span_logits_view() const {
  // Appended in ABI 1.2: a negotiated minor >= 2, a table that holds it, and the head (1.1).
  const fish_plugin_api& a = api();
  return has_span_head() && FISH_ABI_VERSION_MINOR(a.abi_version) >= 2 &&
         FISH_STRUCT_HAS(&a, fish_plugin_api, span_forward_logits_view) && a.span_forward_logits_view;
}

bool PluginBackend::span_forward_logits_view(BackendSpan* s, float* x, int n_tok, int pos0, const float** logits) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!require(has_span_logits_view(), "span_forward_logits_view", "logits view (plugin ABI 1.2)")) return false;
  return call("span_forward_logits_view",
              [&] { return api().span_forward_logits_view(b_, S(s), x, int32_t(n_tok), int32_t(pos0), logits); });
}

bool PluginBackend::span_kv_truncate(BackendSpan* s, int n) {
  std::lock_guard<std::mutex> lk(mu_);
  return call("span_kv_truncate", [&] { return api().span_kv_truncate(b_, S(s), int32_t(n)); });
}

bool PluginBackend::span_kv_reserve(BackendSpan* s, int n) {
  std::lock_guard<std::mutex> lk(mu_);
  return call("span_kv_reserve", [&] { return api().span_kv_reserve(b_, S(s), int32_t(n)); });
}

int PluginBackend::span_kv_len(BackendSpan* s) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!api().span_kv_len) return -1;
  int32_t v = -1;
  return call("span_kv_len", [&] { return api().span_kv_len(b_, S(s), &v); }) ? int(v) : -1;
}

void PluginBackend::span_destroy(BackendSpan* s) {
  if (!s) return;
  std::lock_guard<std::mutex> lk(mu_);
  call("span_destroy", [&] { return api().span_destroy(b_, S(s)); });
}

}  // namespace fish::backend
