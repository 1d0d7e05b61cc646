// A weight matrix resident on the device (the ABI's fish_weight): its GGUF
// type and shape, and the device buffers holding its rows. Uploaded and
// released by VulkanBackend; read by the matmul kernels and by spans.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels.h"
#include "memory.h"

namespace fish::vk {

// Rows [row0, row0 + rows) in GGUF layout, zero-padded at the end: a weight
// larger than one storage-buffer binding is split into chunks.
struct WeightChunk {
  Buffer buf;
  uint32_t row0 = 0, rows = 0;
  VkDescriptorSet set = VK_NULL_HANDLE;  // the stage-1 matmul's (weight, scratch x, scratch y)
  uint64_t set_generation = 0;           // the scratch generation the set was written for
};

struct Weight {
  const MatmulType* type = nullptr;
  std::string name;
  int64_t n_in = 0, n_out = 0;  // one matrix: n_out rows of n_in elements
  int64_t n_mat = 1;            // matrices stored one after another (MoE experts); spans and matmul take 1
  uint64_t row_bytes = 0;
  uint64_t nbytes = 0;          // bytes of the GGUF data (n_mat · n_out rows)
  uint64_t alloc_bytes = 0;     // device bytes held for it
  std::vector<WeightChunk> chunks;
};

// What upload() copies: n_mat · n_out rows of row_bytes, packed (the ABI's fish_weight_desc).
struct WeightUpload {
  uint32_t type = 0;  // GGUF type number
  const char* name = "";
  int64_t n_in = 0, n_out = 0, n_mat = 1;
  const void* data = nullptr;
  uint64_t nbytes = 0;
};

}  // namespace fish::vk
