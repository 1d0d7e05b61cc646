// PreTokenizer: how a byte-level BPE vocabulary splits text into words before
// merging, chosen by tokenizer.ggml.pre. Each pre-tokenizer is a list of split
// regexes applied in turn: every piece from the previous step is searched for
// matches of the next regex, and both the matches and the gaps between them
// become pieces ("isolated" splitting). A regex only sees its own piece: its
// lookaheads, ^ and $ stop at the piece's ends.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/unicode_regex.h"

namespace fish {

class PreTokenizer {
 public:
  // Throws fish::Error "unknown pre-tokenizer '<name>'" for a name it lacks.
  explicit PreTokenizer(std::string_view name);

  static bool is_known(std::string_view name);
  static std::vector<std::string> known_names();
  // default_add_bos() of that name, false for an unknown one.
  static bool adds_bos_by_default(std::string_view name);

  // Byte ranges [begin, end) of the pieces of `text`, in order, covering it exactly.
  using Piece = std::pair<uint32_t, uint32_t>;
  void split(std::string_view text, std::vector<Piece>& pieces) const;
  std::vector<std::string> split(std::string_view text) const;  // the pieces as strings (tests)

  // The same pieces, handed to `fn(begin, end)` as they are found: each regex
  // step runs depth-first on the pieces of the previous one, so nothing but the
  // decoded code points is stored for a long text.
  template <typename Fn>
  void for_each_piece(std::string_view text, Fn&& fn) const {
    Sink sink{&fn, [](void* f, uint32_t b, uint32_t e) { (*static_cast<Fn*>(f))(b, e); }};
    split_impl(text, sink);
  }

  const std::string& name() const { return name_; }
  // Llama 3 vocabularies look a whole word up before merging (HF ignore_merges).
  bool ignore_merges() const { return ignore_merges_; }
  // Whether vocabularies of this kind add BOS when the metadata does not say.
  bool default_add_bos() const { return default_add_bos_; }

 private:
  struct Sink {
    void* fn;
    void (*call)(void*, uint32_t, uint32_t);
  };
  struct Context;
  void split_impl(std::string_view text, const Sink& sink) const;
  void split_level(Context& ctx, size_t level, size_t begin, size_t end) const;

  std::string name_;
  std::vector<UnicodeRegex> regexes_;
  bool ignore_merges_ = false;
  bool default_add_bos_ = false;
};

}  // namespace fish
