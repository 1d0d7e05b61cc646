// fish_skewed: a wrapper around fish_reference that is subtly wrong, to prove
// the conformance suite notices: every product comes back 5% too large and a
// span's output x (FISH_FORWARD_X_OUT) is scaled by 1.05. Everything else
// (negotiation, budget, KV bookkeeping, refusals) is the reference plugin's,
// so those checks still pass.
#define FISH_PLUGIN_IMPLEMENTATION
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "fish/plugin_abi.h"

namespace {

fish_plugin_api g_inner{};  // the reference plugin's table

void scale(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] *= 1.05f;
}

// The reference plugin's weights are opaque to us; remember their n_out by
// asking nothing: the products are scaled over n_tok * n_out, which we learn
// from upload() and keep in a small table.
struct Shape {
  fish_weight* w;
  int64_t n_out;
};
Shape g_shapes[4096];
int g_n_shapes = 0;
int64_t n_out_of(fish_weight* w) {
  for (int i = 0; i < g_n_shapes; ++i)
    if (g_shapes[i].w == w) return g_shapes[i].n_out;
  return 0;
}

fish_status upload(fish_backend* b, const fish_weight_desc* d, fish_weight** out) {
  const fish_status s = g_inner.upload(b, d, out);
  if (s != FISH_OK) return s;
  // A released weight's address may come back for a new one: replace its entry.
  for (int i = 0; i < g_n_shapes; ++i)
    if (g_shapes[i].w == *out) {
      g_shapes[i].n_out = d->n_out;
      return s;
    }
  if (g_n_shapes < 4096) g_shapes[g_n_shapes++] = Shape{*out, d->n_out};
  return s;
}

fish_status matmul(fish_backend* b, fish_weight* w, const float* x, int32_t n_tok, float* y) {
  const fish_status s = g_inner.matmul(b, w, x, n_tok, y);
  if (s == FISH_OK) scale(y, int64_t(n_tok) * n_out_of(w));
  return s;
}

fish_status matmul_group(fish_backend* b, fish_weight* const* ws, int32_t n_w, const float* x, int32_t n_tok,
                         float* const* ys) {
  const fish_status s = g_inner.matmul_group(b, ws, n_w, x, n_tok, ys);
  if (s == FISH_OK)
    for (int32_t i = 0; i < n_w; ++i) scale(ys[i], int64_t(n_tok) * n_out_of(ws[i]));
  return s;
}

int32_t g_span_embd = 0;
fish_status span_create(fish_backend* b, const fish_span_desc* d, fish_span** out) {
  g_span_embd = d->n_embd;
  return g_inner.span_create(b, d, out);
}

fish_status span_forward(fish_backend* b, fish_span* s, fish_span_batch* batch) {
  const fish_status st = g_inner.span_forward(b, s, batch);
  if (st == FISH_OK && (batch->flags & FISH_FORWARD_X_OUT)) scale(batch->x, int64_t(batch->n_tok) * g_span_embd);
  return st;
}

}  // namespace

extern "C" FISH_PLUGIN_EXPORT fish_status fish_plugin_query(uint32_t host_abi_version, const fish_host_api* host,
                                                            fish_plugin_api* out) {
  static fish_plugin_query_fn inner_query = nullptr;
  if (!inner_query) {
    void* h = dlopen(FISH_SKEW_TARGET, RTLD_NOW | RTLD_LOCAL);
    if (h) inner_query = reinterpret_cast<fish_plugin_query_fn>(dlsym(h, FISH_PLUGIN_ENTRY));
    if (!inner_query) {
      fish_plugin_api t{};
      t.struct_size = out->struct_size < sizeof t ? out->struct_size : uint32_t(sizeof t);
      t.name = "skewed";
      t.message = "cannot load " FISH_SKEW_TARGET;
      std::memcpy(out, &t, t.struct_size);
      return FISH_E_INTERNAL;
    }
  }
  const fish_status s = inner_query(host_abi_version, host, out);
  if (s != FISH_OK) return s;
  if (FISH_API_HAS(out, span_forward)) {
    g_inner = *out;
    out->name = "skewed";
    out->upload = upload;
    out->matmul = matmul;
    out->matmul_group = matmul_group;
    out->span_create = span_create;
    out->span_forward = span_forward;
  }
  return s;
}
