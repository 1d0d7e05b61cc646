/* fish_tiny: the smallest useful plugin, in C99, built out of tree against the
 * installed ABI package. F32 weights only, no spans; everything it does it does
 * correctly, so the conformance suite passes on it (other types and spans are
 * reported as skipped). */
#define FISH_PLUGIN_IMPLEMENTATION
#include <fish/plugin_abi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fish_weight {
  struct fish_weight* next;
  int64_t n_in, n_out;
  float* data; /* [n_out][n_in] */
};

struct fish_backend {
  char error[256];
  char text[256];
  struct fish_weight* weights;
  uint64_t budget, resident;
  int opened;
};

static char g_plugin_error[256] = "no error";

static fish_status fail(fish_backend* b, fish_status s, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->error, sizeof b->error, fmt, ap);
  va_end(ap);
  return s;
}

static int owns(const fish_backend* b, const fish_weight* w) {
  const fish_weight* p;
  for (p = b->weights; p; p = p->next)
    if (p == w) return 1;
  return 0;
}

static const char* plugin_error(void) { return g_plugin_error; }

static fish_status probe(fish_probe_result* out) {
  fish_probe_result r;
  memset(&r, 0, sizeof r);
  r.n_devices = 1;
  r.score = 0;
  r.default_device = 0;
  r.struct_size = out->struct_size < sizeof r ? out->struct_size : (uint32_t)sizeof r;
  memcpy(out, &r, r.struct_size);
  return FISH_OK;
}

static fish_status device_info(uint32_t index, fish_device_info* out) {
  fish_device_info d;
  if (index != 0) {
    snprintf(g_plugin_error, sizeof g_plugin_error, "device %u does not exist", (unsigned)index);
    return FISH_E_RANGE;
  }
  memset(&d, 0, sizeof d);
  d.kind = FISH_DEVICE_CPU;
  snprintf(d.name, sizeof d.name, "tiny C plugin (F32 on the host)");
  d.struct_size = out->struct_size < sizeof d ? out->struct_size : (uint32_t)sizeof d;
  memcpy(out, &d, d.struct_size);
  return FISH_OK;
}

static fish_status backend_create(const fish_backend_config* cfg, fish_backend** out) {
  fish_backend* b = (fish_backend*)calloc(1, sizeof *b);
  if (!b) {
    snprintf(g_plugin_error, sizeof g_plugin_error, "out of memory");
    return FISH_E_OUT_OF_MEMORY;
  }
  if (cfg && FISH_STRUCT_HAS(cfg, fish_backend_config, memory_budget)) b->budget = cfg->memory_budget;
  strcpy(b->error, "no error");
  *out = b;
  return FISH_OK;
}

static fish_status backend_destroy(fish_backend* b) {
  while (b && b->weights) {
    fish_weight* w = b->weights;
    b->weights = w->next;
    free(w->data);
    free(w);
  }
  free(b);
  return FISH_OK;
}

static const char* last_error(const fish_backend* b) { return b ? b->error : "no backend"; }

static fish_status open_backend(fish_backend* b) {
  b->opened = 1;
  return FISH_OK;
}

static fish_status describe(fish_backend* b, uint32_t what, const char** out) {
  switch (what) {
    case FISH_DESCRIBE_SUMMARY:
      snprintf(b->text, sizeof b->text, "tiny: %llu bytes of F32 weights", (unsigned long long)b->resident);
      break;
    case FISH_DESCRIBE_STATUS: snprintf(b->text, sizeof b->text, b->opened ? "open: host" : "not opened"); break;
    case FISH_DESCRIBE_PROFILE: b->text[0] = 0; break;
    default: return fail(b, FISH_E_UNSUPPORTED, "describe: unknown selector %u", (unsigned)what);
  }
  *out = b->text;
  return FISH_OK;
}

static fish_status memory_free(fish_backend* b, uint64_t* out) {
  *out = b->budget ? b->budget - b->resident : (uint64_t)1 << 34;
  return FISH_OK;
}

static fish_status bytes_resident(fish_backend* b, uint64_t* out) {
  *out = b->resident;
  return FISH_OK;
}

static fish_status supports(fish_backend* b, uint32_t type, int32_t* out) {
  (void)b;
  *out = type == FISH_TYPE_F32;
  return FISH_OK;
}

static fish_status upload(fish_backend* b, const fish_weight_desc* d, fish_weight** out) {
  fish_weight* w;
  uint64_t bytes;
  if (d->type != FISH_TYPE_F32) return fail(b, FISH_E_UNSUPPORTED, "upload %s: only F32", d->name ? d->name : "");
  if (d->n_mat > 1)
    return fail(b, FISH_E_UNSUPPORTED, "upload %s: stacked matrices (n_mat %lld) are not supported", d->name ? d->name : "",
                (long long)d->n_mat);
  if (d->n_in <= 0 || d->n_out <= 0 || !d->data) return fail(b, FISH_E_INVALID_ARGUMENT, "upload: bad shape or data");
  bytes = (uint64_t)d->n_in * (uint64_t)d->n_out * 4u;
  if (bytes != d->nbytes) return fail(b, FISH_E_INVALID_ARGUMENT, "upload: nbytes does not match the shape");
  if (b->budget && b->resident + bytes > b->budget)
    return fail(b, FISH_E_OUT_OF_MEMORY, "upload %s: %llu bytes exceed the budget", d->name ? d->name : "",
                (unsigned long long)bytes);
  w = (fish_weight*)calloc(1, sizeof *w);
  if (w) w->data = (float*)malloc((size_t)bytes);
  if (!w || !w->data) {
    free(w);
    return fail(b, FISH_E_OUT_OF_MEMORY, "upload: out of host memory");
  }
  memcpy(w->data, d->data, (size_t)bytes);
  w->n_in = d->n_in;
  w->n_out = d->n_out;
  w->next = b->weights;
  b->weights = w;
  b->resident += bytes;
  *out = w;
  return FISH_OK;
}

static fish_status release(fish_backend* b, fish_weight* w) {
  fish_weight** p;
  for (p = &b->weights; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      b->resident -= (uint64_t)w->n_in * (uint64_t)w->n_out * 4u;
      free(w->data);
      free(w);
      return FISH_OK;
    }
  return fail(b, FISH_E_INVALID_ARGUMENT, "release: not a weight of this backend");
}

static fish_status matmul(fish_backend* b, fish_weight* w, const float* x, int32_t n_tok, float* y) {
  int32_t t;
  int64_t r, i;
  if (!owns(b, w)) return fail(b, FISH_E_INVALID_ARGUMENT, "matmul: not a weight of this backend");
  if (n_tok < 1 || !x || !y) return fail(b, FISH_E_INVALID_ARGUMENT, "matmul: n_tok must be >= 1");
  for (t = 0; t < n_tok; ++t)
    for (r = 0; r < w->n_out; ++r) {
      double acc = 0;
      for (i = 0; i < w->n_in; ++i) acc += (double)w->data[r * w->n_in + i] * (double)x[t * w->n_in + i];
      y[t * w->n_out + r] = (float)acc;
    }
  return FISH_OK;
}

static fish_status matmul_group(fish_backend* b, fish_weight* const* ws, int32_t n_w, const float* x, int32_t n_tok,
                                float* const* ys) {
  int32_t i;
  for (i = 0; i < n_w; ++i) {
    fish_status s = matmul(b, ws[i], x, n_tok, ys[i]);
    if (s != FISH_OK) return s;
  }
  return FISH_OK;
}

FISH_PLUGIN_EXPORT fish_status fish_plugin_query(uint32_t host_abi_version, const fish_host_api* host,
                                                 fish_plugin_api* out) {
  fish_plugin_api t;
  (void)host; /* needs no host service */
  memset(&t, 0, sizeof t);
  t.name = "tiny";
  if (FISH_ABI_VERSION_MAJOR(host_abi_version) != FISH_PLUGIN_ABI_MAJOR) {
    t.abi_version = FISH_PLUGIN_ABI_VERSION;
    t.message = "fish_tiny speaks plugin ABI 2.x only";
  } else {
    t.abi_version = FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR, 0);
    t.plugin_version = "2.0 (out of tree, C99)";
    t.plugin_error = plugin_error;
    t.probe = probe;
    t.device_info = device_info;
    t.backend_create = backend_create;
    t.backend_destroy = backend_destroy;
    t.last_error = last_error;
    t.open = open_backend;
    t.describe = describe;
    t.memory_free = memory_free;
    t.bytes_resident = bytes_resident;
    t.supports = supports;
    t.upload = upload;
    t.release = release;
    t.matmul = matmul;
    t.matmul_group = matmul_group;
  }
  t.struct_size = out->struct_size < sizeof t ? out->struct_size : (uint32_t)sizeof t;
  memcpy(out, &t, t.struct_size);
  return t.message ? FISH_E_VERSION : FISH_OK;
}
