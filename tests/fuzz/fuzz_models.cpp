#include "fuzz_models.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <string_view>

#include "common/error.h"
#include "convert/synth_vocab.h"
#include "quant/quant.h"

namespace fish::fuzz {

namespace {

// A deterministic value in [-1, 1) from (seed, tensor, index): splitmix64.
float rnd(uint64_t seed, uint64_t tensor, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + tensor * 0xbf58476d1ce4e5b9ull + i + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return float(double(z >> 11) / double(1ull << 52) - 1.0);
}

// Where the f16 scales of one block lie, for the types fish reads but does not
// write (ggml's block layouts).
std::vector<uint32_t> f16_offsets(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1: return {0, 2};   // d, m, qs[16]
    case GgmlType::Q5_0: return {0};      // d, qh[4], qs[16]
    case GgmlType::Q5_1: return {0, 2};   // d, m, qh[4], qs[16]
    case GgmlType::Q2_K: return {80, 82}; // scales[16], qs[64], d, dmin
    case GgmlType::Q3_K: return {108};    // hmask[32], qs[64], scales[12], d
    default: return {};
  }
}

// ne = {n_in, n_out}: rows of n_in values around `mean` with spread `scale`.
void add(gguf::Writer& w, const std::string& name, GgmlType t, std::vector<int64_t> ne, float mean, float scale,
         uint64_t seed, uint64_t id) {
  const int64_t n_in = ne[0];
  w.add_tensor(name, t, ne, [=](int64_t row0, int64_t n_rows, uint8_t* dst) {
    const uint64_t row_bytes = *ggml_row_bytes(uint32_t(t), n_in);
    if (!can_quantize(t)) {  // random blocks with small f16 scales
      const auto info = ggml_type_info(uint32_t(t));
      const std::vector<uint32_t> scales = f16_offsets(t);
      for (uint64_t i = 0; i < uint64_t(n_rows) * row_bytes; ++i)
        dst[i] = uint8_t(rnd(seed, id, uint64_t(row0) * row_bytes + i) * 127.f + 128.f);
      for (uint64_t b = 0; b < uint64_t(n_rows) * row_bytes; b += info->type_size)
        for (uint32_t off : scales) {
          dst[b + off] = 0x00;
          dst[b + off + 1] = 0x20;  // f16 0x2000 = 2^-7
        }
      return;
    }
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t i = 0; i < n_in; ++i) row[size_t(i)] = mean + scale * rnd(seed, id, uint64_t((row0 + r) * n_in + i));
      quantize_row(t, row.data(), dst + uint64_t(r) * row_bytes, n_in);
    }
  });
}

}  // namespace

void add_tiny_model(gguf::Writer& w, const TinyModel& m) {
  const std::string a = m.arch + ".";
  const int head_dim = m.head_dim ? m.head_dim : m.n_embd / m.n_head;
  const int q_dim = head_dim * m.n_head, kv_dim = head_dim * m.n_head_kv;
  w.set_str("general.architecture", m.arch);
  w.set_str("general.name", "fuzz seed " + m.arch);
  w.set_u32("general.alignment", 32);
  w.set_u32(a + "context_length", uint32_t(m.n_ctx));
  w.set_u32(a + "embedding_length", uint32_t(m.n_embd));
  w.set_u32(a + "block_count", uint32_t(m.n_layer));
  w.set_u32(a + "feed_forward_length", uint32_t(m.n_ff));
  w.set_u32(a + "attention.head_count", uint32_t(m.n_head));
  w.set_u32(a + "attention.head_count_kv", uint32_t(m.n_head_kv));
  if (m.head_dim) w.set_u32(a + "attention.key_length", uint32_t(head_dim));
  w.set_u32(a + "rope.dimension_count", uint32_t(head_dim));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + "rope.freq_base", 10000.f);

  convert::SynthVocab v;
  if (m.n_vocab >= 259) {
    v = convert::make_synth_vocab(m.n_vocab);
  } else {  // <unk> <s> </s> and letter pieces, no byte tokens (other text is <unk>)
    v.tokens = {"<unk>", "<s>", "</s>"};
    v.token_type = {2, 3, 3};
    while (int(v.tokens.size()) < m.n_vocab) {
      v.tokens.push_back("\xe2\x96\x81" + std::string(1, char('a' + v.tokens.size() % 26)) +
                         std::to_string(v.tokens.size()));
      v.token_type.push_back(1);
    }
    v.scores.assign(v.tokens.size(), 0.f);
  }
  w.set_str("tokenizer.ggml.model", "llama");
  w.set_str_array("tokenizer.ggml.tokens", v.tokens);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.token_type);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);

  uint64_t id = 0;
  const float s = 0.5f;
  add(w, "token_embd.weight", m.embd_type, {m.n_embd, m.n_vocab}, m.embd_mean, m.embd_scale, m.seed, id++);
  add(w, "output_norm.weight", m.norm_type, {m.n_embd}, 1, 0.1f, m.seed, id++);
  if (!m.tied) add(w, "output.weight", m.out_type, {m.n_embd, m.n_vocab}, 0, s, m.seed, id++);
  if (m.rope_freqs) add(w, "rope_freqs.weight", GgmlType::F32, {head_dim / 2}, 2, 0.5f, m.seed, id++);
  size_t k = 0;
  auto next_type = [&] { return m.layer_types[k++ % m.layer_types.size()]; };
  for (int l = 0; l < m.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(w, p + "attn_norm.weight", m.norm_type, {m.n_embd}, 1, 0.1f, m.seed, id++);
    add(w, p + "attn_q.weight", next_type(), {m.n_embd, q_dim}, 0, s, m.seed, id++);
    add(w, p + "attn_k.weight", next_type(), {m.n_embd, kv_dim}, 0, s, m.seed, id++);
    add(w, p + "attn_v.weight", next_type(), {m.n_embd, kv_dim}, 0, s, m.seed, id++);
    add(w, p + "attn_output.weight", next_type(), {q_dim, m.n_embd}, 0, s, m.seed, id++);
    if (m.arch == "qwen2") {
      add(w, p + "attn_q.bias", GgmlType::F32, {q_dim}, 0, 0.1f, m.seed, id++);
      add(w, p + "attn_k.bias", GgmlType::F32, {kv_dim}, 0, 0.1f, m.seed, id++);
      add(w, p + "attn_v.bias", GgmlType::F32, {kv_dim}, 0, 0.1f, m.seed, id++);
    }
    if (m.arch == "qwen3") {
      add(w, p + "attn_q_norm.weight", m.norm_type, {head_dim}, 1, 0.1f, m.seed, id++);
      add(w, p + "attn_k_norm.weight", m.norm_type, {head_dim}, 1, 0.1f, m.seed, id++);
    }
    add(w, p + "ffn_norm.weight", m.norm_type, {m.n_embd}, 1, 0.1f, m.seed, id++);
    add(w, p + "ffn_gate.weight", next_type(), {m.n_embd, m.n_ff}, 0, s, m.seed, id++);
    add(w, p + "ffn_up.weight", next_type(), {m.n_embd, m.n_ff}, 0, s, m.seed, id++);
    add(w, p + "ffn_down.weight", next_type(), {m.n_ff, m.n_embd}, 0, s, m.seed, id++);
  }
}

uint32_t kept_tokens(const gguf::File& vocab, uint32_t n_tokens) {
  const gguf::Array* t = vocab.get_arr("tokenizer.ggml.tokens");
  if (!t) throw Error(vocab.path() + ": no tokenizer.ggml.tokens");
  return uint32_t(std::min<uint64_t>(t->size, n_tokens));
}

void copy_tokenizer(gguf::Writer& w, const gguf::File& vocab, uint32_t n_tokens, uint32_t max_merges) {
  const uint32_t n = kept_tokens(vocab, n_tokens);
  for (const char* k : {"tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"})
    w.remove(k);
  for (const auto& kv : vocab.kvs()) {
    const std::string& key = kv.key;
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const gguf::Value& v = kv.value;
    if (key == "tokenizer.ggml.tokens") {
      w.set_str_array(key, std::vector<std::string>(v.arr->strings.begin(), v.arr->strings.begin() + n));
    } else if ((key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type") && v.type == gguf::ValueType::ARRAY &&
               v.arr->is_numeric() && v.arr->size >= n) {
      w.set_array_raw(key, v.arr->type, v.arr->data, n);
    } else if (key == "tokenizer.ggml.merges" && v.type == gguf::ValueType::ARRAY) {
      const auto& toks = vocab.get_arr("tokenizer.ggml.tokens")->strings;
      const std::set<std::string_view> kept(toks.begin(), toks.begin() + n);
      std::vector<std::string> merges;
      for (std::string_view m : v.arr->strings) {
        const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
        if (sp == std::string_view::npos) continue;
        const std::string l(m.substr(0, sp)), r(m.substr(sp + 1));
        if (kept.count(l) && kept.count(r) && kept.count(l + r)) merges.emplace_back(m);
        if (merges.size() >= max_merges) break;
      }
      w.set_str_array(key, merges);
    } else if (key == "tokenizer.chat_template" || key == "tokenizer.huggingface.json") {
      continue;  // large and never read by fish
    } else {
      w.set_value(key, v);
    }
  }
}

namespace {

using G = GgmlType;

void make_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw Error(dir + ": cannot create the folder: " + std::strerror(errno));
}

std::string write_file(const std::string& dir, const std::string& name, const gguf::Writer& w) {
  const std::string path = dir + "/" + name;
  w.write(path);
  return path;
}

gguf::Writer model(const TinyModel& m, const std::function<void(gguf::Writer&)>& edit = nullptr) {
  gguf::Writer w;
  fuzz::add_tiny_model(w, m);
  if (edit) edit(w);
  return w;
}

}  // namespace

std::vector<std::string> write_seeds(const std::string& dir, const std::string& shared) {
  make_dir(dir);
  std::vector<std::string> out;
  auto write = [&](const std::string& d, const std::string& name, const gguf::Writer& w) { out.push_back(write_file(d, name, w)); };
  // Llama with SentencePiece: Q8_0, then every 32-wide type over 2 layers (tied).
  write(dir, "llama-q8_0.gguf", model(TinyModel{}));
  {
    TinyModel m;
    m.n_layer = 2;
    m.tied = true;
    m.embd_type = G::F16;
    m.norm_type = G::F16;
    m.layer_types = {G::F32, G::F16, G::BF16, G::Q4_0, G::Q4_1, G::Q5_0, G::Q5_1, G::Q8_0};
    write(dir, "llama-mixed-tied.gguf", model(m, [](gguf::Writer& w) {
      w.set_version(2);
      w.set_str("llama.rope.scaling.type", "linear");
      w.set_f32("llama.rope.scaling.factor", 2.f);
      w.set_bool("tokenizer.ggml.add_bos_token", true);
      w.set_bool("tokenizer.ggml.add_space_prefix", false);
    }));
  }
  // The K-quants (rows of 256): one layer, each matrix another type, and as
  // few rows as fish allows (2 heads of 32, n_ff 64, 16 tokens), so the file
  // stays under 64 KB; attn_output and ffn_down (rows of 64) take 32-blocks.
  {
    TinyModel m;
    m.n_embd = 256;
    m.n_head = 2;
    m.n_head_kv = 1;
    m.head_dim = 32;
    m.n_ff = 64;
    m.n_vocab = 16;
    m.tied = true;
    m.embd_type = G::Q4_K;
    m.layer_types = {G::Q4_K, G::Q6_K, G::Q5_K, G::Q4_0, G::Q3_K, G::Q2_K, G::Q4_1};
    write(dir, "llama-kquants.gguf", model(m));
  }
  // Byte-level BPE models: qwen2 (biases), qwen3 (q/k norms, key_length != n_embd / n_head), llama3 (rope_freqs).
  const std::string vdir = shared + "/models/vocab/";
  struct Bpe {
    const char* arch;
    const char* vocab;
    const char* pre;
  };
  for (const Bpe& b : {Bpe{"qwen2", "ggml-vocab-gpt-2.gguf", "qwen2"}, Bpe{"qwen3", "ggml-vocab-deepseek-llm.gguf", nullptr},
                       Bpe{"llama", "ggml-vocab-falcon.gguf", "llama-bpe"}}) {
    auto v = gguf::File::open(vdir + b.vocab);
    TinyModel m;
    m.arch = b.arch;
    m.n_vocab = int(fuzz::kept_tokens(*v, 300));
    m.tied = m.arch != "llama";
    m.rope_freqs = m.arch == "llama";
    if (m.arch == "qwen3") m.head_dim = 16;
    m.layer_types = {G::Q8_0, G::Q4_0, G::F16};
    write(dir, std::string(b.arch) + "-bpe.gguf", model(m, [&](gguf::Writer& w) {
      fuzz::copy_tokenizer(w, *v, 300);
      if (b.pre) w.set_str("tokenizer.ggml.pre", b.pre);
      w.set_u32(std::string(b.arch) + ".vocab_size", uint32_t(m.n_vocab));
    }));
  }
  // Vocabulary-only files (fish tokenize loads these): every shared vocab, cut down.
  std::vector<std::string> names;
  if (DIR* d = opendir(vdir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    try {
      auto v = gguf::File::open(vdir + n);
      gguf::Writer w;
      for (const auto& kv : v->kvs())
        if (kv.key.rfind("tokenizer.", 0) != 0) w.set_value(kv.key, kv.value);
      fuzz::copy_tokenizer(w, *v, 400, 2000);
      write(dir, "vocab-" + n.substr(0, n.size() - 5) + ".gguf", w);
    } catch (const Error& e) {
      std::fprintf(stderr, "make_fuzz_seeds: skipped %s: %s\n", n.c_str(), e.what());
    }
  }
  return out;
}

// The crafted files for the bugs issue 22 lists (fixed in cfe9f2d), on the
// smallest model: test_fuzz_regressions.cpp checks each one's exact messages.
std::vector<std::string> write_regressions(const std::string& dir) {
  make_dir(dir);
  std::vector<std::string> out;
  auto write = [&](const std::string& d, const std::string& name, const gguf::Writer& w) { out.push_back(write_file(d, name, w)); };
  const TinyModel base;
  // block_count far beyond what the file's tensors can hold: 8.3 GB allocated
  // and 13 s spent before the fix at 2^24, a bare std::bad_alloc at 2^30.
  write(dir, "block-count-2p24.gguf", model(base, [](gguf::Writer& w) { w.set_u32("llama.block_count", 1u << 24); }));
  write(dir, "block-count-2p30.gguf", model(base, [](gguf::Writer& w) { w.set_u32("llama.block_count", 1u << 30); }));
  // head_count * key_length past int32 (2^28 * 32, found by the CI campaign):
  // a signed overflow (UBSan) in Hparams::q_dim before the fix.
  write(dir, "head-count-2p28.gguf", model(base, [](gguf::Writer& w) {
          w.set_u32("llama.attention.head_count", 1u << 28);
          w.set_u32("llama.attention.key_length", 32);
        }));
  // An empty vocabulary, each way it can be spelled (SIGFPE in load_weights
  // before the fix): vocab_size 0; an empty token list with token_embd and
  // output [n_embd, 0]; token_embd [n_embd, 0] under a full token list; all of
  // them at once with the output tied.
  write(dir, "vocab-size-0.gguf", model(base, [](gguf::Writer& w) { w.set_u32("llama.vocab_size", 0); }));
  auto empty_tokens = [](gguf::Writer& w) {
    w.set_str_array("tokenizer.ggml.tokens", {});
    w.remove("tokenizer.ggml.scores");
    w.remove("tokenizer.ggml.token_type");
  };
  {
    // token_embd and output with 0 rows: a model of n_vocab 0 cannot be made by
    // add_tiny_model (the vocabulary needs 259 tokens), so build it by hand.
    gguf::Writer w = model(base);
    gguf::Writer no_tokens;
    auto src = gguf::File::from_bytes(w.write_to_memory(), "base");
    for (const auto& kv : src->kvs()) no_tokens.set_value(kv.key, kv.value);
    empty_tokens(no_tokens);
    static const float none = 0;
    for (const auto& t : src->tensors()) {
      if (t.name == "token_embd.weight" || t.name == "output.weight")
        no_tokens.add_tensor(t.name, t.type, {t.ne[0], 0}, &none);
      else
        no_tokens.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    }
    write(dir, "empty-token-list.gguf", no_tokens);

    gguf::Writer rows0;
    for (const auto& kv : src->kvs()) rows0.set_value(kv.key, kv.value);
    for (const auto& t : src->tensors()) {
      if (t.name == "token_embd.weight")
        rows0.add_tensor(t.name, t.type, {t.ne[0], 0}, &none);
      else
        rows0.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    }
    write(dir, "token-embd-rows-0.gguf", rows0);

    gguf::Writer all;
    for (const auto& kv : src->kvs()) all.set_value(kv.key, kv.value);
    empty_tokens(all);
    all.set_u32("llama.vocab_size", 0);
    for (const auto& t : src->tensors()) {
      if (t.name == "output.weight") continue;  // tied
      if (t.name == "token_embd.weight")
        all.add_tensor(t.name, t.type, {t.ne[0], 0}, &none);
      else
        all.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    }
    write(dir, "empty-vocab-tied.gguf", all);

  }
  {
    // A NaN among attn_norm's weights, over positive embeddings, before a
    // Q4_K attn_q (repacked into 16-row strips on AVX-512 VNNI): the AVX-512
    // activation quantiser for strips turned the NaN into INT32_MIN among
    // positive values (weights 0.5) and summed that 16-group with the next
    // (weights -1): a signed overflow (UBSan) in fish run. It runs now (NaN
    // logits). Rows of 256 for the K-quant, the rest as small as fish allows.
    TinyModel m;
    m.n_embd = 256;
    m.n_head = 1;
    m.n_head_kv = 1;
    m.head_dim = 32;
    m.n_ff = 32;
    m.n_vocab = 8;
    m.tied = true;
    m.embd_type = GgmlType::Q4_0;
    m.layer_types = {GgmlType::Q4_K, GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::Q4_0,
                     GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::Q4_0};
    m.embd_mean = 0.5f;  // every embedding value in [0.45, 0.55]
    m.embd_scale = 0.05f;
    auto src = gguf::File::from_bytes(model(m).write_to_memory(), "base");
    gguf::Writer nan_norm;
    for (const auto& kv : src->kvs()) nan_norm.set_value(kv.key, kv.value);
    static std::vector<float> w(size_t(m.n_embd), 0.1f);
    w[0] = NAN;
    for (int i = 1; i < 16; ++i) w[size_t(i)] = 0.5f;
    for (int i = 16; i < 32; ++i) w[size_t(i)] = -1.f;
    for (const auto& t : src->tensors()) {
      if (t.name == "blk.0.attn_norm.weight")
        nan_norm.add_tensor(t.name, GgmlType::F32, {t.ne[0]}, w.data());
      else
        nan_norm.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
    }
    write(dir, "nan-norm-kstrip.gguf", nan_norm);
  }
  return out;
}


}  // namespace fish::fuzz
