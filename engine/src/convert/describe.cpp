#include "convert/describe.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "gguf/gguf_file.h"

namespace fish::convert {

namespace {

// llama.cpp's llama_ftype numbering of general.file_type.
const char* file_type_name(uint64_t t) {
  switch (t) {
    case 0: return "ALL_F32";
    case 1: return "MOSTLY_F16";
    case 2: return "MOSTLY_Q4_0";
    case 3: return "MOSTLY_Q4_1";
    case 7: return "MOSTLY_Q8_0";
    case 8: return "MOSTLY_Q5_0";
    case 9: return "MOSTLY_Q5_1";
    case 10: return "MOSTLY_Q2_K";
    case 11: return "MOSTLY_Q3_K_S";
    case 12: return "MOSTLY_Q3_K_M";
    case 13: return "MOSTLY_Q3_K_L";
    case 14: return "MOSTLY_Q4_K_S";
    case 15: return "MOSTLY_Q4_K_M";
    case 16: return "MOSTLY_Q5_K_S";
    case 17: return "MOSTLY_Q5_K_M";
    case 18: return "MOSTLY_Q6_K";
    case 32: return "MOSTLY_BF16";
    default: return "unknown";
  }
}

std::string fmt_g(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// "1.13 MiB" style.
std::string human_bytes(double b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char s[64];
  std::snprintf(s, sizeof s, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return s;
}

std::string human_count(double n) {
  const char* units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (n >= 1000 && u < 4) {
    n /= 1000;
    ++u;
  }
  char s[64];
  std::snprintf(s, sizeof s, u ? "%.2f %s" : "%.0f", n, units[u]);
  return s;
}

// A metadata value as text, whatever its type ("-" when absent). Metadata of
// an unexpected type is shown, never an error: any valid file can be described.
std::string show(const gguf::File& f, const std::string& key) {
  const gguf::Value* v = f.find(key);
  if (!v) return "-";
  switch (v->type) {
    case gguf::ValueType::STRING: return std::string(v->str);
    case gguf::ValueType::FLOAT32:
    case gguf::ValueType::FLOAT64: return fmt_g(v->f);
    case gguf::ValueType::BOOL: return v->u ? "true" : "false";
    case gguf::ValueType::ARRAY: return std::string("(array of ") + std::to_string(v->arr->size) + ")";
    case gguf::ValueType::INT8:
    case gguf::ValueType::INT16:
    case gguf::ValueType::INT32:
    case gguf::ValueType::INT64: return std::to_string(v->i);
    default: return std::to_string(v->u);
  }
}

// Text from the file made safe for a terminal: control bytes (C0, DEL, and the
// C1 controls' UTF-8 forms, which some terminals take as escape sequences)
// become \xNN, so metadata cannot move the cursor or recolour the screen.
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xC2 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xE0) == 0x80;
    if (c < 0x20 || c == 0x7F || c1) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02X", c1 ? static_cast<unsigned char>(s[++i]) : c);
      out += b;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A metadata number, if present and numeric.
bool number(const gguf::File& f, const std::string& key, double& out) {
  const gguf::Value* v = f.find(key);
  if (!v || !(v->is_integer() || v->is_float())) return false;
  out = v->f;
  return true;
}

}  // namespace

std::string describe_file(const std::string& path) {
  auto f = gguf::File::open(path);
  std::string out;
  auto line = [&](const char* label, const std::string& value) {
    char b[32];
    std::snprintf(b, sizeof b, "%-18s ", label);
    out += b + printable(value) + "\n";
  };

  const std::string arch = f->find("general.architecture") ? show(*f, "general.architecture") : "";
  const std::string a = arch + ".";
  line("file", path);
  line("file size", std::to_string(f->size()) + " bytes (" + human_bytes(double(f->size())) + ")");
  line("gguf", "version " + std::to_string(f->version()) + ", alignment " + std::to_string(f->alignment()) + ", " +
                   std::to_string(f->kvs().size()) + " metadata keys, data at byte " + std::to_string(f->data_offset()));
  line("architecture", arch.empty() ? "-" : arch);
  line("name", show(*f, "general.name"));
  double ft = 0;
  line("file type", number(*f, "general.file_type", ft)
                        ? std::to_string(uint64_t(ft)) + " (" + file_type_name(uint64_t(ft)) + ")"
                        : show(*f, "general.file_type"));

  line("block count", show(*f, a + "block_count"));
  line("embedding length", show(*f, a + "embedding_length"));
  line("attention heads", show(*f, a + "attention.head_count"));
  line("kv heads", show(*f, a + "attention.head_count_kv"));
  double n_embd = 0, n_head = 0;
  if (f->find(a + "attention.key_length"))
    line("head dim", show(*f, a + "attention.key_length"));
  else if (number(*f, a + "embedding_length", n_embd) && number(*f, a + "attention.head_count", n_head) && n_head > 0)
    line("head dim", fmt_g(n_embd / n_head));
  else
    line("head dim", "-");
  line("feed forward", show(*f, a + "feed_forward_length"));
  // Mixture of experts: the layout, the routing rule the loader applies
  // (model/hparams.h MoeGating) and where the bytes are.
  if (double n_exp = 0; number(*f, a + "expert_count", n_exp) && n_exp > 0) {
    std::string moe = fmt_g(n_exp) + " experts, " + show(*f, a + "expert_used_count") + " used per token, expert FFN ";
    moe += f->find(a + "expert_feed_forward_length") ? show(*f, a + "expert_feed_forward_length")
                                                      : show(*f, a + "feed_forward_length");
    if (f->find(a + "expert_shared_feed_forward_length"))
      moe += ", shared expert " + show(*f, a + "expert_shared_feed_forward_length");
    moe += arch == "qwen2moe" ? ", gating softmax-topk (+ sigmoid-gated shared expert)" : ", gating softmax-topk-norm";
    line("experts", moe);
    uint64_t exp_bytes = 0, other = 0;
    for (auto& t : f->tensors()) {
      const bool stacked = t.name.find("_exps.weight") != std::string::npos;
      (stacked ? exp_bytes : other) += t.nbytes;
    }
    const double per_tok = n_exp > 0 ? double(exp_bytes) / n_exp : 0;
    double used = 0;
    number(*f, a + "expert_used_count", used);
    line("expert bytes", std::to_string(exp_bytes) + " (" + human_bytes(double(exp_bytes)) + ") in experts, " +
                             std::to_string(other) + " (" + human_bytes(double(other)) + ") the rest; a token reads " +
                             human_bytes(per_tok * used + double(other)) + " at most");
  }

  const gguf::Value* toks = f->find("tokenizer.ggml.tokens");
  const uint64_t n_tokens = toks && toks->type == gguf::ValueType::ARRAY ? toks->arr->size : 0;
  if (f->find(a + "vocab_size"))
    line("vocab size", show(*f, a + "vocab_size"));
  else if (n_tokens)
    line("vocab size", std::to_string(n_tokens));
  else if (const auto* te = f->tensor("token_embd.weight"); te && te->n_dims >= 2)
    line("vocab size", std::to_string(te->ne[1]));
  else
    line("vocab size", "-");
  line("context length", show(*f, a + "context_length"));

  // RoPE: base (llama.cpp's default 10000 when absent), dimensions, scaling as
  // metadata (rope.scaling.*) or as a rope_freqs.weight tensor of divisors.
  std::string rope = "base " + (f->find(a + "rope.freq_base") ? show(*f, a + "rope.freq_base") : "10000 (default)");
  if (f->find(a + "rope.dimension_count")) rope += ", dimensions " + show(*f, a + "rope.dimension_count");
  std::string scaling = "none";
  if (f->find(a + "rope.scaling.type")) {
    scaling = show(*f, a + "rope.scaling.type");
    if (f->find(a + "rope.scaling.factor")) scaling += " factor " + show(*f, a + "rope.scaling.factor");
    if (f->find(a + "rope.scaling.original_context_length"))
      scaling += " original context " + show(*f, a + "rope.scaling.original_context_length");
  }
  if (const auto* rf = f->tensor("rope_freqs.weight")) {
    scaling = (scaling == "none" ? "" : scaling + "; ") + "rope_freqs.weight " + rf->shape_str();
    if (rf->type == GgmlType::F32 && rf->n_dims == 1 && rf->ne[0] > 0) {
      std::vector<float> v(size_t(rf->ne[0]));
      std::memcpy(v.data(), rf->data, v.size() * sizeof(float));
      scaling += " (factors " + fmt_g(*std::min_element(v.begin(), v.end())) + " .. " +
                 fmt_g(*std::max_element(v.begin(), v.end())) + ")";
    }
  }
  line("rope", rope + ", scaling " + scaling);
  if (f->find(a + "attention.layer_norm_rms_epsilon") || !f->find(a + "attention.layer_norm_epsilon"))
    line("rms eps", show(*f, a + "attention.layer_norm_rms_epsilon"));
  else
    line("layer norm eps", show(*f, a + "attention.layer_norm_epsilon"));

  std::string tok = show(*f, "tokenizer.ggml.model") + ", pre " + show(*f, "tokenizer.ggml.pre") + ", " +
                    std::to_string(n_tokens) + " tokens";
  tok += " (bos " + show(*f, "tokenizer.ggml.bos_token_id") + ", eos " + show(*f, "tokenizer.ggml.eos_token_id") + ")";
  line("tokenizer", tok);

  std::map<uint32_t, int> per_type;
  uint64_t bytes = 0;
  int64_t params = 0;
  for (auto& t : f->tensors()) {
    ++per_type[uint32_t(t.type)];
    bytes += t.nbytes;
    params += t.n_elements();
  }
  std::string types;
  for (auto& [t, n] : per_type) types += (types.empty() ? "" : ", ") + ggml_type_name(t) + " " + std::to_string(n);
  line("tensors", std::to_string(f->tensors().size()) + (types.empty() ? "" : " (" + types + ")"));
  line("tensor bytes", std::to_string(bytes) + " (" + human_bytes(double(bytes)) + ")");
  line("parameters", std::to_string(params) + " (" + human_count(double(params)) + ")");
  return out;
}

}  // namespace fish::convert
