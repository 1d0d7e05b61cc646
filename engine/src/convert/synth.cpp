#include "convert/synth.h"

#include <cmath>
#include <deque>
#include <vector>

#include "common/error.h"
#include "convert/prng.h"
#include "convert/row_fill.h"
#include "convert/synth_shape.h"
#include "convert/synth_vocab.h"
#include "convert/type_mix.h"
#include "cpu/thread_pool.h"
#include "gguf/gguf_writer.h"

namespace fish::convert {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// How a tensor's values are drawn: mean + std * N(0, 1) (approximately normal,
// see prng.h), or a fixed table (rope_freqs).
struct Init {
  float mean = 0.f;
  float std = 0.f;
  const std::vector<float>* table = nullptr;
};

void add_metadata(gguf::Writer& w, const SynthShape& s, Format f, uint64_t seed) {
  const std::string a = s.arch;
  w.set_str("general.architecture", a);
  w.set_str("general.name", std::string("synthetic ") + s.model + " (random weights, seed " + std::to_string(seed) + ")");
  w.set_u32(a + ".context_length", uint32_t(s.n_ctx));
  w.set_u32(a + ".embedding_length", uint32_t(s.n_embd));
  w.set_u32(a + ".block_count", uint32_t(s.n_layer));
  w.set_u32(a + ".feed_forward_length", uint32_t(s.n_ff));
  w.set_u32(a + ".rope.dimension_count", uint32_t(s.head_dim));
  w.set_u32(a + ".attention.head_count", uint32_t(s.n_head));
  w.set_u32(a + ".attention.head_count_kv", uint32_t(s.n_head_kv));
  w.set_u32(a + ".attention.key_length", uint32_t(s.head_dim));
  w.set_u32(a + ".attention.value_length", uint32_t(s.head_dim));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32(a + ".rope.freq_base", s.rope_base);
  w.set_u32(a + ".vocab_size", uint32_t(s.n_vocab));
  if (s.n_expert > 0) {
    w.set_u32(a + ".expert_count", uint32_t(s.n_expert));
    w.set_u32(a + ".expert_used_count", uint32_t(s.n_expert_used));
    // Mixtral's experts are feed_forward_length wide; qwen3moe says so apart.
    if (a != "llama") w.set_u32(a + ".expert_feed_forward_length", uint32_t(s.n_ff_expert));
    if (s.n_ff_shexp > 0) w.set_u32(a + ".expert_shared_feed_forward_length", uint32_t(s.n_ff_shexp));
  }

  const SynthVocab v = make_synth_vocab(s.n_vocab);
  w.set_str("tokenizer.ggml.model", "llama");
  w.set_str_array("tokenizer.ggml.tokens", v.tokens);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.token_type);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_u32("general.alignment", 32);
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", file_type(f));
}

// Builds the writer: metadata, and every tensor with a lazy fill (nothing is
// generated until the writer calls the fills).
SynthSummary build(const SynthOptions& o, ThreadPool& pool, std::deque<std::vector<float>>& tables, gguf::Writer& w) {
  const SynthShape* s = find_synth_shape(o.shape);
  if (!s) throw Error("synth: unknown shape '" + o.shape + "' (one of: " + join(synth_shape_ids()) + ")");
  const auto f = parse_format(o.type);
  if (!f) throw Error("synth: unknown type '" + o.type + "' (one of: F32, F16, Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K)");

  add_metadata(w, *s, *f, o.seed);
  SynthSummary sum;

  // Scales: inputs of a projection have unit RMS (they come out of an RMS norm), so
  // an input projection with std 1/sqrt(fan_in) gives unit-variance outputs; the
  // projections back into the residual stream are further scaled by 1/sqrt(2 n_layer)
  // so the 2 n_layer additions leave the residual O(1). Embeddings 1/sqrt(n_embd):
  // logits of a unit-RMS hidden state then have unit spread.
  const float in_std = 1.0f / std::sqrt(float(s->n_embd));
  const float depth = 1.0f / std::sqrt(2.0f * float(s->n_layer));
  const float attn_out_std = depth / std::sqrt(float(s->n_head * s->head_dim));
  const float ffn_down_std = depth / std::sqrt(float(s->n_ff));
  const Init norm{1.0f, 0.02f};
  const Init bias{0.0f, 0.02f};

  auto add = [&](const std::string& name, std::vector<int64_t> ne, Init init) {
    const uint32_t n_dims = uint32_t(ne.size());
    const TypeChoice choice = choose_type(*f, name, ne[0], n_dims, s->n_layer, s->tied, GgmlType::F32, s->n_expert);
    const GgmlType type = choice.type;
    if (!choice.note.empty()) sum.notes.push_back(name + ": " + choice.note);
    int64_t n_el = 1;
    for (int64_t d : ne) n_el *= d;
    sum.n_params += n_el;
    sum.tensors.push_back({name, type, ne});
    const int64_t row_len = ne[0];
    const uint64_t key = stream_key(o.seed, name);
    MakeRow make;
    if (init.table) {
      const std::vector<float>* t = init.table;
      make = [t, row_len](int64_t r, float* dst) {
        for (int64_t j = 0; j < row_len; ++j) dst[j] = (*t)[size_t(r * row_len + j)];
      };
    } else {
      make = [key, row_len, init](int64_t r, float* dst) {
        const uint64_t base = uint64_t(r) * uint64_t(row_len);
        for (int64_t j = 0; j < row_len; ++j) dst[j] = init.mean + init.std * unit_normal(key, base + uint64_t(j));
      };
    }
    w.add_tensor(name, type, ne, quantizing_fill(pool, type, row_len, std::move(make)));
  };

  const int64_t E = s->n_embd, F = s->n_ff, V = s->n_vocab;
  const int64_t q_dim = int64_t(s->n_head) * s->head_dim, kv_dim = int64_t(s->n_head_kv) * s->head_dim;
  add("token_embd.weight", {E, V}, Init{0.f, in_std});
  if (s->rope_scale_factor > 0) {
    tables.push_back(llama3_rope_factors(s->head_dim, s->rope_base, s->rope_scale_factor, s->rope_low_freq_factor,
                                         s->rope_high_freq_factor, s->rope_orig_ctx));
    add("rope_freqs.weight", {int64_t(tables.back().size())}, Init{0.f, 0.f, &tables.back()});
  }
  for (int i = 0; i < s->n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", {E}, norm);
    add(b + "attn_q.weight", {E, q_dim}, Init{0.f, in_std});
    if (s->qkv_bias) add(b + "attn_q.bias", {q_dim}, bias);
    add(b + "attn_k.weight", {E, kv_dim}, Init{0.f, in_std});
    if (s->qkv_bias) add(b + "attn_k.bias", {kv_dim}, bias);
    add(b + "attn_v.weight", {E, kv_dim}, Init{0.f, in_std});
    if (s->qkv_bias) add(b + "attn_v.bias", {kv_dim}, bias);
    if (s->qk_norm) {
      add(b + "attn_q_norm.weight", {s->head_dim}, norm);
      add(b + "attn_k_norm.weight", {s->head_dim}, norm);
    }
    add(b + "attn_output.weight", {q_dim, E}, Init{0.f, attn_out_std});
    add(b + "ffn_norm.weight", {E}, norm);
    if (s->n_expert > 0) {
      // Router logits of unit spread (std 1/sqrt(E) on a unit-RMS input);
      // each expert a dense FFN of Fe rows.
      const int64_t NE = s->n_expert, Fe = s->n_ff_expert;
      add(b + "ffn_gate_inp.weight", {E, NE}, Init{0.f, in_std});
      add(b + "ffn_gate_exps.weight", {E, Fe, NE}, Init{0.f, in_std});
      add(b + "ffn_up_exps.weight", {E, Fe, NE}, Init{0.f, in_std});
      add(b + "ffn_down_exps.weight", {Fe, E, NE}, Init{0.f, depth / std::sqrt(float(Fe))});
      if (s->n_ff_shexp > 0) {  // qwen2moe's shared expert and its gate vector
        const int64_t Fs = s->n_ff_shexp;
        add(b + "ffn_gate_inp_shexp.weight", {E}, Init{0.f, in_std});
        add(b + "ffn_gate_shexp.weight", {E, Fs}, Init{0.f, in_std});
        add(b + "ffn_up_shexp.weight", {E, Fs}, Init{0.f, in_std});
        add(b + "ffn_down_shexp.weight", {Fs, E}, Init{0.f, depth / std::sqrt(float(Fs))});
      }
    } else {
      add(b + "ffn_gate.weight", {E, F}, Init{0.f, in_std});
      add(b + "ffn_up.weight", {E, F}, Init{0.f, in_std});
      add(b + "ffn_down.weight", {F, E}, Init{0.f, ffn_down_std});
    }
  }
  add("output_norm.weight", {E}, norm);
  if (!s->tied) add("output.weight", {E, V}, Init{0.f, in_std});
  sum.file_bytes = w.file_size();
  return sum;
}

}  // namespace

void synth_metadata(gguf::Writer& w, const std::string& shape, const std::string& type, uint64_t seed) {
  const SynthShape* s = find_synth_shape(shape);
  const auto f = parse_format(type);
  if (!s || !f) throw Error("synth: unknown shape '" + shape + "' or type '" + type + "'");
  add_metadata(w, *s, *f, seed);
}

SynthSummary synth_model(const SynthOptions& o) {
  ThreadPool pool(o.n_threads);
  std::deque<std::vector<float>> tables;  // fixed tensors, alive until the write
  gguf::Writer w;
  SynthSummary sum = build(o, pool, tables, w);
  if (o.progress) w.set_progress(o.progress);
  w.write(o.out);
  return sum;
}

SynthSummary plan_synth(const SynthOptions& o) {
  ThreadPool pool(1);
  std::deque<std::vector<float>> tables;
  gguf::Writer w;
  return build(o, pool, tables, w);
}

}  // namespace fish::convert
