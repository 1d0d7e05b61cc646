#include "convert/type_mix.h"

#include <cctype>

#include "quant/quant.h"

namespace fish::convert {

namespace {
struct FormatRow {
  Format f;
  const char* name;
  uint32_t file_type;
  GgmlType matrix;  // the type of an ordinary matrix
};
constexpr FormatRow kFormats[] = {
    {Format::F32, "F32", 0, GgmlType::F32},     {Format::F16, "F16", 1, GgmlType::F16},
    {Format::Q8_0, "Q8_0", 7, GgmlType::Q8_0},  {Format::Q4_0, "Q4_0", 2, GgmlType::Q4_0},
    {Format::Q4_K_M, "Q4_K_M", 15, GgmlType::Q4_K},
    {Format::Q5_K_M, "Q5_K_M", 17, GgmlType::Q5_K},
    {Format::Q6_K, "Q6_K", 18, GgmlType::Q6_K},
};
const FormatRow& row_of(Format f) {
  for (auto& r : kFormats)
    if (r.f == f) return r;
  return kFormats[0];
}
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
int block_size(GgmlType t) { return ggml_type_info(t)->block_size; }
}  // namespace

std::optional<Format> parse_format(std::string_view s) {
  for (auto& r : kFormats) {
    const std::string_view n = r.name;
    if (n.size() != s.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size(); ++i)
      eq = eq && std::toupper(static_cast<unsigned char>(s[i])) == n[i];
    if (eq) return r.f;
  }
  return std::nullopt;
}

const char* format_name(Format f) { return row_of(f).name; }
uint32_t file_type(Format f) { return row_of(f).file_type; }

int layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int v = 0;
  size_t i = 4;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    v = v * 10 + (name[i] - '0');
    if (v > 1000000) return -1;
  }
  return i > 4 && i < name.size() && name[i] == '.' ? v : -1;
}

bool use_more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

TypeChoice choose_type(Format f, std::string_view name, int64_t ne0, uint32_t n_dims, int n_layer, bool tied,
                       GgmlType keep, int n_expert) {
  if (n_dims < 2 || ends_with(name, ".ffn_gate_inp.weight")) return {keep, ""};
  GgmlType want = row_of(f).matrix;
  if (f == Format::Q4_K_M || f == Format::Q5_K_M || f == Format::Q6_K) {
    const bool is_output = name == "output.weight" || (tied && name == "token_embd.weight");
    const int layer = layer_of(name);
    const bool more_bits_kind = ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight") ||
                                ends_with(name, ".ffn_down_exps.weight");
    if (is_output || (more_bits_kind && layer >= 0 && use_more_bits(layer, n_layer))) want = GgmlType::Q6_K;
    if (n_expert == 8 && (ends_with(name, ".attn_v.weight") || ends_with(name, ".attn_k.weight")))
      want = GgmlType::Q8_0;
    if (f == Format::Q4_K_M && n_expert == 8 && ends_with(name, ".attn_output.weight")) want = GgmlType::Q5_K;
  }
  if (ne0 % block_size(want) == 0) return {want, ""};

  const std::string len = "row length " + std::to_string(ne0) + " is not a multiple of " +
                          ggml_type_name(want) + "'s block size " + std::to_string(block_size(want));
  GgmlType alt = want;
  if (want == GgmlType::Q4_K) alt = can_quantize(GgmlType::Q5_0) ? GgmlType::Q5_0 : GgmlType::Q4_0;
  if (want == GgmlType::Q5_K) alt = can_quantize(GgmlType::Q5_1) ? GgmlType::Q5_1 : GgmlType::Q8_0;
  if (want == GgmlType::Q6_K) alt = GgmlType::Q8_0;
  if (alt != want && ne0 % block_size(alt) == 0) return {alt, len + ": " + ggml_type_name(alt) + " instead"};
  return {keep, len + ": kept as " + ggml_type_name(keep)};
}

}  // namespace fish::convert
