// The GGUF tensor types (ggml's numbering) and their block geometry.
// A row of n elements of type t takes n / block_size(t) * type_size(t) bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace fish {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21,
  IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
  IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
  // fish's own layouts, from 1000 up (plugin_abi.h FISH_TYPE_*): made by the
  // engine for a device copy (online re-quantisation), never found in a GGUF
  // file. FQ3: 3-bit, 112 bytes per 256 values (quant/blocks.h BlockFQ3).
  FQ3 = 1000,
};

constexpr int QK_K = 256;  // super-block size of the K-quants

struct GgmlTypeInfo {
  const char* name;   // "Q4_K"
  int block_size;     // elements per block (1 for F32/F16/BF16)
  int type_size;      // bytes per block
  bool computable;    // fish can dequantise it (and so load a model holding it)
};

// Geometry of any type ggml knows, or nullopt for a number ggml never assigned.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type);
inline std::optional<GgmlTypeInfo> ggml_type_info(GgmlType t) { return ggml_type_info(uint32_t(t)); }

// Whether t may appear in a GGUF file: a type ggml assigned, not one of fish's
// own (FQ3): the reader and the writer refuse the others.
bool ggml_type_in_gguf(uint32_t type);
inline bool ggml_type_in_gguf(GgmlType t) { return ggml_type_in_gguf(uint32_t(t)); }

// "Q4_K", or "type 99" for an unknown number.
std::string ggml_type_name(uint32_t type);
inline std::string ggml_type_name(GgmlType t) { return ggml_type_name(uint32_t(t)); }

// Bytes of a row of n elements; nullopt when n is not a multiple of the block
// size or the type is unknown. Overflow-safe for any n < 2^62.
std::optional<uint64_t> ggml_row_bytes(uint32_t type, int64_t n);

}  // namespace fish
