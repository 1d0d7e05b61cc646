// Tokenizer::from_gguf and the make_*_tokenizer factories: read the
// tokenizer.ggml.* metadata, check it, and build SpmTokenizer or BpeTokenizer.
//
// Keys: model (required: "llama" = SentencePiece, "gpt2" = byte-level BPE),
// tokens (required string array), scores (f32 array, SPM), token_type (int
// array), merges (string array, BPE), pre (BPE pre-tokenizer; absent =
// "default"), bos/eos/unknown/eot/eom_token_id, add_bos_token, add_eos_token,
// add_space_prefix (SPM).
#include <cmath>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fish {

namespace {

TokenAttr attr_from_int(int64_t v) {
  return v >= 0 && v <= 6 ? static_cast<TokenAttr>(v) : TokenAttr::Undefined;
}

class MetaReader {
 public:
  explicit MetaReader(const gguf::File& f) : f_(f) {}

  [[noreturn]] void fail(std::string_view key, const std::string& why) const {
    throw Error(f_.path() + ": metadata '" + std::string(key) + "': " + why);
  }

  const gguf::Array& string_array(std::string_view key, bool required) const {
    const gguf::Array* a = f_.get_arr(key);
    if (!a) {
      if (required) fail(key, "missing");
      return empty_;
    }
    if (a->type != gguf::ValueType::STRING)
      fail(key, std::string("expected an array of strings, found an array of ") + gguf::value_type_name(a->type));
    return *a;
  }

  // A numeric array of exactly n elements (or absent: nullptr).
  const gguf::Array* numeric_array(std::string_view key, uint64_t n, std::string_view count_key) const {
    const gguf::Array* a = f_.get_arr(key);
    if (!a) return nullptr;
    if (!a->is_numeric())
      fail(key, std::string("expected a numeric array, found an array of ") + gguf::value_type_name(a->type));
    if (a->size != n)
      fail(key, "has " + std::to_string(a->size) + " entries but '" + std::string(count_key) + "' has " +
                    std::to_string(n));
    return a;
  }

  // A token id: absent -> fallback; negative or >= n_vocab -> -1 (none).
  int32_t token_id(std::string_view key, int32_t fallback, int64_t n_vocab) const {
    const gguf::Value* v = f_.find(key);
    if (!v) return fallback;
    if (!v->is_integer()) fail(key, std::string("expected an integer, found ") + gguf::value_type_name(v->type));
    if (v->type == gguf::ValueType::UINT64 || v->type == gguf::ValueType::UINT32 ||
        v->type == gguf::ValueType::UINT16 || v->type == gguf::ValueType::UINT8)
      return v->u < uint64_t(n_vocab) ? int32_t(v->u) : -1;
    return v->i >= 0 && v->i < n_vocab ? int32_t(v->i) : -1;
  }

  std::optional<bool> flag(std::string_view key) const { return f_.get_bool(key); }

 private:
  const gguf::File& f_;
  gguf::Array empty_;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  const MetaReader meta(file);
  const char* kModel = "tokenizer.ggml.model";
  const char* kTokens = "tokenizer.ggml.tokens";
  const auto model_v = file.get_str(kModel);
  if (!model_v) meta.fail(kModel, "missing (the file has no tokenizer)");
  const std::string model(*model_v);
  if (model != "llama" && model != "gpt2")
    meta.fail(kModel, "unsupported tokenizer model '" + model +
                          "' (supported: 'llama' = SentencePiece, 'gpt2' = byte-level BPE)");

  const gguf::Array& tok_arr = meta.string_array(kTokens, true);
  const uint64_t n = tok_arr.size;
  if (n == 0) meta.fail(kTokens, "is empty");
  if (n > uint64_t(INT32_MAX)) meta.fail(kTokens, "has too many tokens");
  std::vector<std::string> tokens(tok_arr.strings.begin(), tok_arr.strings.end());

  std::vector<float> scores;
  if (const gguf::Array* a = meta.numeric_array("tokenizer.ggml.scores", n, kTokens)) {
    scores.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      scores[i] = float(a->number(i));
      if (std::isnan(scores[i])) meta.fail("tokenizer.ggml.scores", "entry " + std::to_string(i) + " is NaN");
    }
  }
  std::vector<TokenAttr> types;
  if (const gguf::Array* a = meta.numeric_array("tokenizer.ggml.token_type", n, kTokens)) {
    types.resize(n);
    for (uint64_t i = 0; i < n; ++i) types[i] = attr_from_int(a->integer(i));
  }

  const bool spm = model == "llama";
  const auto nv = int64_t(n);
  TokenizerConfig cfg;
  cfg.bos = meta.token_id("tokenizer.ggml.bos_token_id", spm ? 1 : -1, nv);
  cfg.eos = meta.token_id("tokenizer.ggml.eos_token_id", spm ? 2 : -1, nv);
  cfg.unk = meta.token_id("tokenizer.ggml.unknown_token_id", spm ? 0 : -1, nv);
  cfg.eot = meta.token_id("tokenizer.ggml.eot_token_id", -1, nv);
  cfg.eom = meta.token_id("tokenizer.ggml.eom_token_id", -1, nv);
  cfg.add_bos = meta.flag("tokenizer.ggml.add_bos_token");
  cfg.add_eos = meta.flag("tokenizer.ggml.add_eos_token");
  cfg.add_space_prefix = meta.flag("tokenizer.ggml.add_space_prefix");

  try {
    auto vocab = std::make_unique<Vocab>(std::move(tokens), std::move(scores), std::move(types));
    if (spm) return std::make_unique<SpmTokenizer>(std::move(vocab), cfg);

    const char* kPre = "tokenizer.ggml.pre";
    const std::string pre(file.get_str(kPre).value_or("default"));
    if (!PreTokenizer::is_known(pre)) {
      std::string known;
      for (const auto& k : PreTokenizer::known_names()) known += (known.empty() ? "" : ", ") + k;
      meta.fail(kPre, "unknown pre-tokenizer '" + pre + "' (known: " + known + ")");
    }
    const gguf::Array& merges = meta.string_array("tokenizer.ggml.merges", true);
    return std::make_unique<BpeTokenizer>(std::move(vocab), merges.strings, pre, cfg);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(file.path(), 0) == 0) throw;  // already names the file
    throw Error(file.path() + ": " + msg);
  }
}

std::unique_ptr<Tokenizer> make_bpe_tokenizer(std::vector<std::string> tokens, std::vector<std::string> merges,
                                              std::string_view pre, std::vector<TokenAttr> types,
                                              const TokenizerConfig& config) {
  auto vocab = std::make_unique<Vocab>(std::move(tokens), std::vector<float>{}, std::move(types));
  const std::vector<std::string_view> views(merges.begin(), merges.end());
  return std::make_unique<BpeTokenizer>(std::move(vocab), views, pre, config);
}

std::unique_ptr<Tokenizer> make_spm_tokenizer(std::vector<std::string> tokens, std::vector<float> scores,
                                              std::vector<TokenAttr> types, const TokenizerConfig& config) {
  auto vocab = std::make_unique<Vocab>(std::move(tokens), std::move(scores), std::move(types));
  return std::make_unique<SpmTokenizer>(std::move(vocab), config);
}

}  // namespace fish
