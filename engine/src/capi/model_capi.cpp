// The model part of the C API: load, info, tokens, eval, logits, KV, stats.
#include <chrono>
#include <cstddef>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <algorithm>

#include "capi/capi_util.h"
#include "capi/sampler_internal.h"
#include "common/error.h"
#include "cpu/matmul.h"
#include "gguf/gguf_file.h"
#include "model/embed_batch.h"
#include "model/json_schema.h"
#include "model/json_schema_prefix.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

struct fish_model {
  std::unique_ptr<fish::LlamaModel> m;
  std::string error;
  std::string backend_name, gpu_detail, requant_detail, device_layers;
  fish_stats stats{};
  // A cache (the JSON constraints build it on first use, also through a const model).
  mutable std::mutex json_mu;
  mutable std::shared_ptr<const fish::JsonVocab> json_vocab;
};

using fish::capi::guarded;

namespace {

template <class Fn>
int run_status(fish_model* m, Fn&& fn) {
  fish_error* e = nullptr;
  if (guarded(&e, fn)) return 0;
  m->error = fish_error_message(e);
  fish_error_free(e);
  return 1;
}

int32_t copy_out(const std::string& s, char* buf, int32_t cap) {
  if (int64_t(s.size()) > cap) return -int32_t(s.size());
  if (!s.empty()) std::memcpy(buf, s.data(), s.size());
  return int32_t(s.size());
}

}  // namespace

static void model_info(const fish_model* fm, fish_model_info* out) {
  fish_model_info i{};
  const auto& m = *fm->m;
  const auto& h = m.hparams();
  auto* self = const_cast<fish_model*>(fm);
  i.struct_size = sizeof i;
  i.arch = h.arch_name.c_str();
  i.name = h.name.c_str();
  i.tokenizer = m.tokenizer().kind();
  i.n_vocab = h.n_vocab;
  i.n_ctx_train = h.n_ctx_train;
  i.n_ctx = m.n_ctx();
  i.n_embd = h.n_embd;
  i.n_layer = h.n_layer;
  i.n_head = h.n_head;
  i.n_head_kv = h.n_head_kv;
  i.head_dim = h.head_dim;
  i.n_ff = h.n_ff;
  i.n_params = m.n_params();
  i.file_bytes = m.file().size();
  i.bos = m.tokenizer().bos();
  i.eos = m.tokenizer().eos();
  i.n_threads = m.n_threads();
  i.gpu_layers = m.gpu_layers();
  i.gpu_output = m.gpu_output();
  i.gpu_span = m.gpu_span();
  self->backend_name = m.backend() ? m.backend()->name() : "cpu";
  self->gpu_detail = m.gpu_detail();
  i.backend = self->backend_name.c_str();
  i.gpu_detail = self->gpu_detail.c_str();
  i.cpu_kernels = fish::matmul_kernel_name();
  self->requant_detail = m.requant_detail();
  i.gpu_requant = fish::requant_mode_name(m.requant_mode());
  i.requant_detail = self->requant_detail.c_str();
  const fish::RequantStats& rq = m.requant_stats();
  i.requant_converted = rq.converted;
  i.requant_cached = rq.cached;
  i.requant_rejected = rq.rejected;
  i.requant_seconds = rq.convert_seconds;
  i.requant_ns_per_weight = rq.ns_per_weight();
  i.n_expert = h.n_expert;
  i.n_expert_used = h.n_expert_used;
  i.n_ff_expert = h.n_ff_expert;
  i.gpu_span_layers = m.span_layers();
  i.cpu_moe_layers = m.cpu_moe_layers();
  self->device_layers.clear();
  for (const fish::DevicePart& d : m.device_parts()) {
    if (!self->device_layers.empty()) self->device_layers += ' ';
    self->device_layers += std::to_string(d.device) + ":";
    self->device_layers += d.n_gpu > 0 ? std::to_string(d.end - d.n_gpu) + "-" + std::to_string(d.end - 1) : "-";
  }
  i.n_gpu_devices = int32_t(m.device_parts().size());
  i.gpu_device_layers = self->device_layers.c_str();
  std::memcpy(out, &i, std::min<size_t>(out->struct_size ? out->struct_size : sizeof i, sizeof i));
}

namespace {

// The model's tokens as constraints read them, built on first use.
std::shared_ptr<const fish::JsonVocab> json_vocab(const fish_model* m) {
  std::lock_guard<std::mutex> lk(m->json_mu);
  if (!m->json_vocab) m->json_vocab = fish::JsonVocab::from(m->m->tokenizer());
  return m->json_vocab;
}

}  // namespace

extern "C" {

FISH_API fish_model_params fish_model_default_params(void) {
  fish_model_params p{};
  p.struct_size = sizeof(fish_model_params);
  p.n_threads = 0;
  p.n_ctx = 0;
  p.gpu_layers = -1;
  p.gpu_span = -1;
  p.verbose = 0;
  p.vocab_only = 0;
  p.config = nullptr;
  p.gpu_requant = -1;
  p.n_seq = 1;
  p.prefix_cache_mb = 256;
  p.n_cpu_moe = -1;
  p.gpu_devices = nullptr;
  p.tensor_split = nullptr;
  return p;
}

FISH_API fish_model* fish_model_load(const char* path, const fish_model_params* params, fish_error** err) {
  if (!path) {
    fish::capi::set_error(err, "fish_model_load: no path");
    return nullptr;
  }
  fish_model_params p = fish_model_default_params();
  if (params) std::memcpy(&p, params, std::min<size_t>(params->struct_size, sizeof p));
  auto fm = std::make_unique<fish_model>();
  const bool ok = guarded(err, [&] {
    fish::matmul_kernel_name();  // FISH_CPU_KERNELS naming kernels this CPU lacks: this load's error, not a later abort
    fish::ModelOptions o;
    fish::EngineConfig cfg = fish::EngineConfig::process();
    if (p.config) {  // NULL from the defaults when the caller's struct predates the field
      std::string why;
      cfg = cfg.with(p.config, &why);
      if (!why.empty()) throw fish::Error(std::string("fish_model_params.config: ") + why);
    }
    // The device list and the split go through the configuration's parser (one for both).
    for (const auto& [field, var, text] : {std::tuple{"gpu_devices", "FISH_GPU_DEVICE", p.gpu_devices},
                                           std::tuple{"tensor_split", "FISH_TENSOR_SPLIT", p.tensor_split}}) {
      if (!text) continue;
      if (!*text || std::strpbrk(text, " \t\r\n"))
        throw fish::Error(std::string("fish_model_params.") + field + ": '" + text + "' is not a comma list");
      std::string why;
      cfg = cfg.with(std::string(var) + "=" + text, &why);
      if (!why.empty()) throw fish::Error(std::string("fish_model_params.") + field + ": " + why);
    }
    o.config = &cfg;
    o.n_threads = p.n_threads;
    o.n_ctx = p.n_ctx;
    o.gpu_layers = p.gpu_layers;
    o.gpu_span = p.gpu_span;
    if (p.gpu_requant < -1 || p.gpu_requant > int32_t(fish::RequantMode::Auto))
      throw fish::Error("fish_model_params.gpu_requant: " + std::to_string(p.gpu_requant) +
                        " is not -1 (FISH_GPU_REQUANT), 0 (off), 1, 2, 3 or 4 (auto)");
    if (p.n_seq < 0 || p.n_seq > 4096)
      throw fish::Error("fish_model_params.n_seq: " + std::to_string(p.n_seq) + " (0..4096)");
    o.n_seq = p.n_seq > 0 ? p.n_seq : 1;
    if (p.prefix_cache_mb < 0) throw fish::Error("fish_model_params.prefix_cache_mb: " + std::to_string(p.prefix_cache_mb) + " (>= 0)");
    o.prefix_cache_mb = p.prefix_cache_mb;
    o.gpu_requant = p.gpu_requant;
    if (p.n_cpu_moe < -1) throw fish::Error("fish_model_params.n_cpu_moe: " + std::to_string(p.n_cpu_moe) + " (>= -1)");
    o.n_cpu_moe = p.n_cpu_moe;
    o.verbose = p.verbose != 0;
    o.vocab_only = p.vocab_only != 0;
    if (p.progress)
      o.progress = [fn = p.progress, user = p.progress_user](const char* phase, double f) { fn(user, phase, float(f)); };
    fm->m = fish::LlamaModel::load(path, o);
  });
  if (!ok) return nullptr;
  fm->stats.struct_size = sizeof(fish_stats);
  return fm.release();
}

FISH_API void fish_model_free(fish_model* m) { delete m; }

FISH_API const char* fish_last_error(const fish_model* m) { return m ? m->error.c_str() : "no model"; }

FISH_API void fish_model_get_info(const fish_model* fm, fish_model_info* out) {
  if (!fm || !out) return;
  fish::capi::fenced_void([&] { model_info(fm, out); });
}

FISH_API int32_t fish_tokenize(const fish_model* m, const char* text, size_t len, int add_special, int parse_special,
                               int32_t* out, int32_t cap) {
  if (!m || (!text && len)) return -INT32_MAX;
  std::vector<int32_t> ids;
  fish_error* e = nullptr;
  if (!guarded(&e, [&] { ids = m->m->tokenizer().encode(std::string_view(text ? text : "", len), add_special, parse_special); })) {
    const_cast<fish_model*>(m)->error = fish_error_message(e);
    fish_error_free(e);
    return -INT32_MAX;
  }
  if (int64_t(ids.size()) > cap) return -int32_t(ids.size());
  std::copy(ids.begin(), ids.end(), out);
  return int32_t(ids.size());
}

FISH_API int32_t fish_token_to_piece(const fish_model* m, int32_t token, char* buf, int32_t cap, int special) {
  if (!m || token < 0 || token >= m->m->tokenizer().n_vocab()) return 0;
  return fish::capi::fenced(int32_t(0),
                            [&] { return copy_out(m->m->tokenizer().token_to_piece(token, special != 0), buf, cap); });
}

FISH_API int32_t fish_detokenize(const fish_model* m, const int32_t* ids, int32_t n, char* buf, int32_t cap,
                                 int special) {
  if (!m || n < 0) return 0;
  for (int32_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= m->m->tokenizer().n_vocab()) return 0;
  return fish::capi::fenced(int32_t(0), [&] {
    return copy_out(m->m->tokenizer().decode(std::vector<int32_t>(ids, ids + n), special != 0), buf, cap);
  });
}

FISH_API int fish_sampler_constrain_json(fish_sampler* s, const fish_model* m, fish_error** err) {
  if (!s || !m) {
    fish::capi::set_error(err, "fish_sampler_constrain_json: no sampler or no model");
    return 1;
  }
  return guarded(err, [&] { fish::capi::sampler_of(s).constrain_json(json_vocab(m)); }) ? 0 : 1;
}

FISH_API int fish_sampler_constrain_json_schema(fish_sampler* s, const fish_model* m, const char* schema_json,
                                                fish_error** err) {
  if (!s || !m || !schema_json) {
    fish::capi::set_error(err, "fish_sampler_constrain_json_schema: no sampler, model or schema");
    return 1;
  }
  return guarded(err, [&] {
           // Compiled before the sampler is touched: a refused schema leaves it as it was.
           auto schema = fish::JsonSchema::compile(schema_json);
           fish::capi::sampler_of(s).constrain(
               std::make_unique<fish::JsonSchemaConstraint>(json_vocab(m), fish::JsonSchemaPrefix(std::move(schema))));
         })
             ? 0
             : 1;
}

FISH_API int fish_json_schema_check(const char* schema_json, fish_error** err) {
  if (!schema_json) {
    fish::capi::set_error(err, "fish_json_schema_check: no schema");
    return 1;
  }
  return guarded(err, [&] { fish::JsonSchema::compile(schema_json); }) ? 0 : 1;
}

FISH_API int fish_token_is_eog(const fish_model* m, int32_t token) {
  return fish::capi::fenced(0, [&] { return m && m->m->tokenizer().is_eog(token) ? 1 : 0; });
}

FISH_API int fish_eval(fish_model* m, const int32_t* tokens, int32_t n, int32_t pos, int all_logits) {
  if (!m) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = run_status(m, [&] { m->m->eval(tokens, n, pos, all_logits != 0); });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc == 0) {
    if (n > 1) {
      m->stats.n_prompt_tokens += n;
      m->stats.prompt_seconds += dt;
    } else {
      m->stats.n_gen_tokens += n;
      m->stats.gen_seconds += dt;
    }
  }
  return rc;
}

FISH_API const float* fish_get_logits(fish_model* m, int32_t i) {
  return fish::capi::fenced(static_cast<const float*>(nullptr), [&] { return m ? m->m->logits(i) : nullptr; });
}

FISH_API int32_t fish_kv_len(const fish_model* m) { return m ? m->m->kv_len() : 0; }

FISH_API int fish_kv_truncate(fish_model* m, int32_t n) {
  if (!m) return 1;
  return run_status(m, [&] { m->m->kv_truncate(n); });
}

FISH_API int fish_decode(fish_model* m, const fish_batch* b) {
  if (!m) return 1;
  if (!b || b->struct_size < offsetof(fish_batch, logits) + sizeof(b->logits) || b->n_tokens <= 0 || !b->token ||
      !b->pos) {
    m->error = "fish_decode: a batch needs struct_size, n_tokens > 0, token and pos";
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<uint8_t> want;
  if (b->logits) want.assign(b->logits, b->logits + b->n_tokens);
  const int rc = run_status(m, [&] {
    m->m->eval_batch(b->token, b->seq_id, b->pos, b->logits ? want.data() : nullptr, b->n_tokens);
  });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc == 0) {
    m->stats.n_gen_tokens += b->n_tokens;
    m->stats.gen_seconds += dt;
  }
  return rc;
}

FISH_API const float* fish_get_logits_ith(fish_model* m, int32_t i) {
  return fish::capi::fenced(static_cast<const float*>(nullptr), [&] { return m ? m->m->logits_row(i) : nullptr; });
}

FISH_API int32_t fish_n_seq(const fish_model* m) { return m ? m->m->n_seq() : 0; }

FISH_API int32_t fish_seq_len(const fish_model* m, int32_t seq) {
  return m && seq >= 0 && seq < m->m->n_seq() ? m->m->seq_len(seq) : -1;
}

FISH_API int fish_seq_truncate(fish_model* m, int32_t seq, int32_t n) {
  if (!m) return 1;
  return run_status(m, [&] { m->m->seq_truncate(seq, n); });
}

FISH_API int fish_seq_copy(fish_model* m, int32_t src, int32_t dst, int32_t n) {
  if (!m) return 1;
  return run_status(m, [&] { m->m->seq_copy(src, dst, n); });
}

FISH_API int fish_seq_release(fish_model* m, int32_t seq) {
  if (!m) return 1;
  return run_status(m, [&] { m->m->seq_release(seq); });
}

FISH_API int32_t fish_seq_reuse(fish_model* m, int32_t dst, const int32_t* tokens, int32_t n) {
  if (!m || n < 0 || (!tokens && n)) return -1;
  int32_t got = -1;
  if (run_status(m, [&] { got = m->m->seq_reuse(dst, tokens, n); }) != 0) return -1;
  return got;
}

FISH_API uint64_t fish_prefix_cache_bytes(const fish_model* m) { return m ? m->m->prefix_cache_bytes() : 0; }

FISH_API uint64_t fish_kv_bytes(const fish_model* m) { return m ? m->m->kv_cache().bytes() : 0; }
FISH_API int32_t fish_kv_pages(const fish_model* m) { return m ? m->m->kv_cache().pages_in_use() : 0; }

FISH_API void fish_get_stats(const fish_model* m, fish_stats* out) {
  if (!m || !out) return;
  fish::capi::fenced_void([&] {
    fish_stats s = m->stats;
    s.struct_size = sizeof s;
    s.gpu_submits = m->m->stats().gpu_submits;
    s.gpu_fallbacks = m->m->stats().gpu_fallbacks;
    std::memcpy(out, &s, std::min<size_t>(out->struct_size ? out->struct_size : sizeof s, sizeof s));
  });
}

FISH_API void fish_reset_stats(fish_model* m) {
  if (!m) return;
  m->stats = fish_stats{};
  m->stats.struct_size = sizeof(fish_stats);
  m->m->reset_stats();
}

}  // extern "C"

// ---- embeddings ---------------------------------------------------------------

FISH_API fish_embed_params fish_embed_default_params(void) {
  fish_embed_params p{};
  p.struct_size = sizeof p;
  p.pooling = FISH_POOLING_MEAN;
  p.normalize = 1;
  p.seq = 0;
  p.n_seq = 1;
  return p;
}

FISH_API int32_t fish_n_embd(const fish_model* m) { return m ? m->m->hparams().n_embd : 0; }

FISH_API int fish_embed_tokens(fish_model* m, const int32_t* const* tokens, const int32_t* n_tokens,
                               int32_t n_inputs, const fish_embed_params* params, float* out) {
  if (!m) return 1;
  fish_embed_params p = fish_embed_default_params();
  if (params) {
    if (params->struct_size < offsetof(fish_embed_params, seq) + sizeof(params->seq)) {
      m->error = "fish_embed_tokens: params->struct_size is too small (use fish_embed_default_params)";
      return 1;
    }
    // A caller built before n_seq passes the smaller struct: the rest keeps the defaults.
    std::memcpy(&p, params, std::min<size_t>(params->struct_size, sizeof p));
  }
  if (n_inputs < 0 || (n_inputs > 0 && (!tokens || !n_tokens || !out))) {
    m->error = "fish_embed_tokens: n_inputs >= 0 inputs need tokens, n_tokens and out";
    return 1;
  }
  if (p.pooling < FISH_POOLING_MEAN || p.pooling > FISH_POOLING_FIRST) {
    m->error = "fish_embed_tokens: pooling " + std::to_string(p.pooling) + " (expected 0 mean, 1 last or 2 first)";
    return 1;
  }
  const int32_t n_seq = m->m->n_seq();
  if (p.seq < 0 || p.seq >= n_seq) {
    m->error = "fish_embed_tokens: sequence " + std::to_string(p.seq) + " is outside 0.." + std::to_string(n_seq - 1);
    return 1;
  }
  if (p.n_seq < 1 || p.n_seq > n_seq - p.seq) {
    m->error = "fish_embed_tokens: params.n_seq " + std::to_string(p.n_seq) + " is outside 1.." +
               std::to_string(n_seq - p.seq) + " (the sequences from params.seq " + std::to_string(p.seq) +
               " must be among the model's " + std::to_string(n_seq) + ", fish_model_params.n_seq)";
    return 1;
  }
  const int32_t n_ctx = m->m->n_ctx(), n_vocab = m->m->hparams().n_vocab;
  for (int32_t i = 0; i < n_inputs; ++i) {
    const std::string which = "fish_embed_tokens: input " + std::to_string(i);
    if (n_tokens[i] <= 0 || !tokens[i]) {
      m->error = which + " has no tokens";
      return 1;
    }
    if (n_tokens[i] > n_ctx) {
      m->error = which + " has " + std::to_string(n_tokens[i]) + " tokens, more than the context length " +
                 std::to_string(n_ctx);
      return 1;
    }
    for (int32_t t = 0; t < n_tokens[i]; ++t)
      if (tokens[i][t] < 0 || tokens[i][t] >= n_vocab) {
        m->error = which + ": token id " + std::to_string(tokens[i][t]) + " is outside the vocabulary (0.." +
                   std::to_string(n_vocab - 1) + ")";
        return 1;
      }
  }
  const auto t0 = std::chrono::steady_clock::now();
  int64_t total = 0;
  for (int32_t i = 0; i < n_inputs; ++i) total += n_tokens[i];
  fish::EmbedOptions o;
  o.pooling = fish::EmbedPooling(p.pooling);
  o.normalize = p.normalize != 0;
  o.seq = p.seq;
  o.n_seq = p.n_seq;
  const int rc = run_status(m, [&] { fish::embed_batch(*m->m, tokens, n_tokens, n_inputs, o, out); });
  if (rc != 0) {
    m->error = "fish_embed_tokens: " + m->error;  // embed_batch names the inputs
    return rc;
  }
  m->stats.n_prompt_tokens += total;
  m->stats.prompt_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 0;
}

FISH_API int fish_embed_texts(fish_model* m, const char* const* texts, int32_t n_inputs,
                              const fish_embed_params* params, float* out, int32_t* n_tokens_out) {
  if (!m) return 1;
  if (n_inputs < 0 || (n_inputs > 0 && !texts)) {
    m->error = "fish_embed_texts: n_inputs >= 0 inputs need texts";
    return 1;
  }
  std::vector<std::vector<int32_t>> ids(size_t(std::max(n_inputs, 0)));
  for (int32_t i = 0; i < n_inputs; ++i) {
    if (!texts[i]) {
      m->error = "fish_embed_texts: input " + std::to_string(i) + " is NULL";
      return 1;
    }
    const int rc = run_status(m, [&] { ids[size_t(i)] = m->m->tokenizer().encode(texts[i], true, false); });
    if (rc != 0) return rc;
    if (ids[size_t(i)].empty()) {
      m->error = "fish_embed_texts: input " + std::to_string(i) + " has no tokens";
      return 1;
    }
    if (n_tokens_out) n_tokens_out[i] = int32_t(ids[size_t(i)].size());
  }
  std::vector<const int32_t*> ptr;
  std::vector<int32_t> len;
  for (const auto& v : ids) {
    ptr.push_back(v.data());
    len.push_back(int32_t(v.size()));
  }
  return fish_embed_tokens(m, ptr.data(), len.data(), n_inputs, params, out);
}
