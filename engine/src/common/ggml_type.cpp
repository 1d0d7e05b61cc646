#include "common/ggml_type.h"

namespace fish {

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t t) {
  switch (GgmlType(t)) {
    case GgmlType::F32: return GgmlTypeInfo{"F32", 1, 4, true};
    case GgmlType::F16: return GgmlTypeInfo{"F16", 1, 2, true};
    case GgmlType::BF16: return GgmlTypeInfo{"BF16", 1, 2, true};
    case GgmlType::Q4_0: return GgmlTypeInfo{"Q4_0", 32, 18, true};
    case GgmlType::Q4_1: return GgmlTypeInfo{"Q4_1", 32, 20, true};
    case GgmlType::Q5_0: return GgmlTypeInfo{"Q5_0", 32, 22, true};
    case GgmlType::Q5_1: return GgmlTypeInfo{"Q5_1", 32, 24, true};
    case GgmlType::Q8_0: return GgmlTypeInfo{"Q8_0", 32, 34, true};
    case GgmlType::Q8_1: return GgmlTypeInfo{"Q8_1", 32, 36, false};
    case GgmlType::Q2_K: return GgmlTypeInfo{"Q2_K", 256, 84, true};
    case GgmlType::Q3_K: return GgmlTypeInfo{"Q3_K", 256, 110, true};
    case GgmlType::Q4_K: return GgmlTypeInfo{"Q4_K", 256, 144, true};
    case GgmlType::Q5_K: return GgmlTypeInfo{"Q5_K", 256, 176, true};
    case GgmlType::Q6_K: return GgmlTypeInfo{"Q6_K", 256, 210, true};
    case GgmlType::Q8_K: return GgmlTypeInfo{"Q8_K", 256, 292, false};
    case GgmlType::IQ2_XXS: return GgmlTypeInfo{"IQ2_XXS", 256, 66, false};
    case GgmlType::IQ2_XS: return GgmlTypeInfo{"IQ2_XS", 256, 74, false};
    case GgmlType::IQ3_XXS: return GgmlTypeInfo{"IQ3_XXS", 256, 98, false};
    case GgmlType::IQ1_S: return GgmlTypeInfo{"IQ1_S", 256, 50, false};
    case GgmlType::IQ4_NL: return GgmlTypeInfo{"IQ4_NL", 32, 18, false};
    case GgmlType::IQ3_S: return GgmlTypeInfo{"IQ3_S", 256, 110, false};
    case GgmlType::IQ2_S: return GgmlTypeInfo{"IQ2_S", 256, 82, false};
    case GgmlType::IQ4_XS: return GgmlTypeInfo{"IQ4_XS", 256, 136, false};
    case GgmlType::I8: return GgmlTypeInfo{"I8", 1, 1, false};
    case GgmlType::I16: return GgmlTypeInfo{"I16", 1, 2, false};
    case GgmlType::I32: return GgmlTypeInfo{"I32", 1, 4, false};
    case GgmlType::I64: return GgmlTypeInfo{"I64", 1, 8, false};
    case GgmlType::F64: return GgmlTypeInfo{"F64", 1, 8, false};
    case GgmlType::IQ1_M: return GgmlTypeInfo{"IQ1_M", 256, 56, false};
    case GgmlType::TQ1_0: return GgmlTypeInfo{"TQ1_0", 256, 54, false};
    case GgmlType::TQ2_0: return GgmlTypeInfo{"TQ2_0", 256, 66, false};
    case GgmlType::MXFP4: return GgmlTypeInfo{"MXFP4", 32, 17, false};
    case GgmlType::FQ3: return GgmlTypeInfo{"FQ3", 256, 112, true};
  }
  return std::nullopt;
}

bool ggml_type_in_gguf(uint32_t t) { return t < uint32_t(GgmlType::FQ3) && ggml_type_info(t).has_value(); }

std::string ggml_type_name(uint32_t t) {
  auto info = ggml_type_info(t);
  return info ? std::string(info->name) : "type " + std::to_string(t);
}

std::optional<uint64_t> ggml_row_bytes(uint32_t t, int64_t n) {
  auto info = ggml_type_info(t);
  if (!info || n < 0 || n % info->block_size != 0) return std::nullopt;
  const uint64_t blocks = uint64_t(n) / uint64_t(info->block_size);
  if (blocks > (uint64_t(1) << 62) / uint64_t(info->type_size)) return std::nullopt;
  return blocks * uint64_t(info->type_size);
}

}  // namespace fish
