// The split patterns of each tokenizer.ggml.pre value. The patterns are those
// published in each model family's tokenizer.json (HuggingFace tokenizers),
// as GGUF converters name them.
#include "tokenizer/pretokenizer.h"

#include "common/error.h"

namespace fish {

namespace {

// GPT-2's pattern (also gpt-neox, MPT, OLMo, ...): contractions, optional space +
// letters / numbers / other symbols, then whitespace runs that leave the last
// space to the next word.
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Llama 3: case-insensitive contractions, a letter run with one optional
// leading non-letter/non-digit (not a newline), digits in groups of up to 3,
// symbols with trailing newlines, newline runs.
constexpr const char* kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen2 (and Qwen2.5 / Qwen3): as Llama 3 with single digits.
constexpr const char* kQwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2's word pattern without the final \s+ alternative, as the multi-step
// pre-tokenizers below list it (a lone whitespace before a non-space stays a
// gap piece, which is the same piece \s+ would have made).
constexpr const char* kGpt2Words =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

// DeepSeek LLM: newlines alone; an optional space + a run of Latin/Greek/
// Cyrillic/... cased letters (the explicit ranges of its tokenizer.json); ASCII
// and full-width punctuation runs; trailing whitespace; CJK/Hangul runs; numbers.
constexpr const char* kDeepseekLlmLetters =
    "\\s?["
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
    "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
    "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}"
    "\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"
    "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}"
    "\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
    "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}"
    "\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
    "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}"
    "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"
    "]+";

// CJK ideographs (U+4E00..U+9FA5), U+0800..U+4E00, and Hangul syllables and
// Jamo extensions up to U+D7FF, as DeepSeek's tokenizer.json lists them.
constexpr const char* kCjkRuns = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

struct Spec {
  std::vector<const char*> names;
  std::vector<const char*> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Spec>& specs() {
  static const std::vector<Spec> kSpecs = {
      // llama.cpp's fallback for GGUFs without a pre-tokenizer name: punctuation
      // runs first, then GPT-2 words, numbers, and groups of three ASCII digits.
      {{"default"},
       {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Words, "\\p{N}+", "[0-9][0-9][0-9]"}},
      {{"gpt-2", "gpt2", "gpt-neox", "phi-2", "mpt", "olmo", "jais"}, {kGpt2}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3"}, {kLlama3}, true, true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}},
      {{"qwen2", "qwen2.5", "deepseek-r1-qwen", "stablelm2"}, {kQwen2}},
      {{"deepseek-llm"},
       {"[\\r\\n]", kDeepseekLlmLetters, "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "\\s+$", kCjkRuns, "\\p{N}+"}},
      {{"deepseek-coder"}, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjkRuns, "\\p{N}"}},
      {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Words, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {"\\p{N}", kGpt2Words}},
  };
  return kSpecs;
}

const Spec* find_spec(std::string_view name) {
  for (const auto& s : specs())
    for (const char* n : s.names)
      if (name == n) return &s;
  return nullptr;
}

}  // namespace

bool PreTokenizer::is_known(std::string_view name) { return find_spec(name) != nullptr; }

bool PreTokenizer::adds_bos_by_default(std::string_view name) {
  const Spec* s = find_spec(name);
  return s && s->add_bos;
}

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> out;
  for (const auto& s : specs())
    for (const char* n : s.names) out.emplace_back(n);
  return out;
}

PreTokenizer::PreTokenizer(std::string_view name) : name_(name) {
  const Spec* spec = find_spec(name);
  if (!spec) {
    std::string known;
    for (const auto& n : known_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown pre-tokenizer '" + std::string(name) + "' (known: " + known + ")");
  }
  for (const char* p : spec->patterns) regexes_.emplace_back(p);
  ignore_merges_ = spec->ignore_merges;
  default_add_bos_ = spec->add_bos;
}

struct PreTokenizer::Context {
  std::vector<uint32_t> cps, offsets;  // code points of the text, byte offset of each (+ end)
  UnicodeRegex::Scratch scratch;
  const Sink* sink;
};

void PreTokenizer::split_impl(std::string_view text, const Sink& sink) const {
  if (text.empty()) return;
  Context ctx;
  ctx.sink = &sink;
  unicode::decode_utf8_all(text, ctx.cps, ctx.offsets);
  split_level(ctx, 0, 0, ctx.cps.size());
}

// Splits code points [begin, end) with regex `level`; each piece (match or gap)
// goes on to the next level, or to the sink after the last one.
void PreTokenizer::split_level(Context& ctx, size_t level, size_t begin, size_t end) const {
  if (level == regexes_.size()) {
    ctx.sink->call(ctx.sink->fn, ctx.offsets[begin], ctx.offsets[end]);
    return;
  }
  const UnicodeRegex& re = regexes_[level];
  size_t pos = begin, from = begin, mb = 0, me = 0;
  while (from <= end && re.search(ctx.cps.data(), begin, end, from, mb, me, ctx.scratch)) {
    if (me == mb) {  // empty match: only a split point
      if (mb > pos && mb < end) {
        split_level(ctx, level + 1, pos, mb);
        pos = mb;
      }
      from = mb + 1;
      continue;
    }
    if (mb > pos) split_level(ctx, level + 1, pos, mb);
    split_level(ctx, level + 1, mb, me);
    pos = from = me;
  }
  if (pos < end) split_level(ctx, level + 1, pos, end);
}

void PreTokenizer::split(std::string_view text, std::vector<Piece>& pieces) const {
  pieces.clear();
  for_each_piece(text, [&](uint32_t b, uint32_t e) { pieces.emplace_back(b, e); });
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<Piece> pieces;
  split(text, pieces);
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& [b, e] : pieces) out.emplace_back(text.substr(b, e - b));
  return out;
}

}  // namespace fish
