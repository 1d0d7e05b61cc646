// Tokenizer: one interface for SentencePiece (tokenizer.ggml.model = "llama")
// and byte-level BPE ("gpt2" with its tokenizer.ggml.pre pre-tokenizer); the
// model's GGUF metadata picks the implementation.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fish {

namespace gguf { class File; }

enum class TokenAttr : int32_t {  // tokenizer.ggml.token_type
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer named by the file's metadata; throws fish::Error naming
  // the key on an unknown model/pre-tokenizer or inconsistent vocab arrays.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

  // Text -> ids. add_special: prepend BOS / append EOS as the metadata says
  // (tokenizer.ggml.add_bos_token / add_eos_token, with the family's defaults).
  // parse_special: control (and unknown) token texts in `text` become those
  // tokens; otherwise they are tokenized as plain text. User-defined tokens
  // (added vocabulary such as gpt-neox's runs of spaces) are always matched,
  // as the vocabularies' own tokenizers do. Matching is leftmost-longest.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // The bytes one token stands for, as printed while streaming (SentencePiece's
  // U+2581 becomes a space, byte tokens become their byte, BPE bytes are
  // unmapped): a character split over byte tokens comes out one byte per call.
  // Control, unknown and unused tokens give "" unless `special` is true.
  // Throws fish::Error for an id outside [0, n_vocab).
  virtual std::string token_to_piece(int32_t id, bool special = false) const = 0;

  // ids -> text. Concatenates the pieces; for SentencePiece the leading space
  // of the first token is removed when the vocab adds a space prefix and
  // remove_leading_space is true (decode(encode(s)) == s).
  virtual std::string decode(const std::vector<int32_t>& ids, bool special = false,
                             bool remove_leading_space = true) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;   // -1 when none
  virtual int32_t eos() const = 0;   // -1 when none
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  virtual bool is_eog(int32_t id) const = 0;  // end of generation (EOS, EOT, ...)
  virtual std::string_view token_text(int32_t id) const = 0;  // the raw vocab entry
  virtual const char* kind() const = 0;  // "spm" or "bpe"
  virtual TokenAttr token_attr(int32_t id) const = 0;
  // The pre-tokenizer name for BPE ("gpt-2", "llama-bpe", ...), "" for SPM.
  virtual std::string_view pre_name() const = 0;
};

// What GGUF metadata says beyond the vocabulary arrays, for building a
// tokenizer by hand (tests, tokenizers from other files). -1 = none.
struct TokenizerConfig {
  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  std::optional<bool> add_bos, add_eos;  // absent: the family default (SPM: BOS yes; BPE: per pre-tokenizer)
  std::optional<bool> add_space_prefix;  // SPM only; absent: true
};

// Byte-level BPE from its parts: tokens in the byte-level alphabet, merges as
// "left right" in rank order, the pre-tokenizer name (throws fish::Error for an
// unknown one), token types (empty: all Normal). Throws on inconsistent sizes.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(std::vector<std::string> tokens, std::vector<std::string> merges,
                                              std::string_view pre, std::vector<TokenAttr> types = {},
                                              const TokenizerConfig& config = {});

// SentencePiece (BPE by score) from tokens, scores and types (empty: all Normal).
std::unique_ptr<Tokenizer> make_spm_tokenizer(std::vector<std::string> tokens, std::vector<float> scores,
                                              std::vector<TokenAttr> types = {}, const TokenizerConfig& config = {});

}  // namespace fish
