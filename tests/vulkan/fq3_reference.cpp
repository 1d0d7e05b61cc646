// Reading ../shared/reference/fq3 (see fq3_reference.h).
#include "fq3_reference.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace fish::vktest {
namespace {

constexpr size_t kBlockBytes = 112, kBlockValues = 256;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

Fq3Reference read_fq3_reference(const std::string& dir) {
  Fq3Reference r;
  const std::vector<uint8_t> blocks = read_all(dir + "/fq3_blocks.bin");
  const std::vector<uint8_t> values = read_all(dir + "/fq3_values.f32");
  if (blocks.size() != kFq3RefBlocks * kBlockBytes || values.size() != kFq3RefBlocks * kBlockValues * 4) return r;
  r.m.type = GgmlType::FQ3;
  r.m.n_in = int64_t(kBlockValues);
  r.m.n_out = kFq3RefBlocks;
  r.m.row_bytes = kBlockBytes;
  r.m.data = blocks;
  r.m.name = "FQ3 reference blocks";
  r.values.resize(values.size() / 4);
  std::memcpy(r.values.data(), values.data(), values.size());  // little-endian f32, as this machine's
  return r;
}

Fq3Reference fq3_reference_finite(const Fq3Reference& ref) {
  Fq3Reference f = ref;
  f.m.n_out = ref.m.n_out - 1;
  f.m.data.erase(f.m.data.begin() + kFq3NanBlock * kBlockBytes, f.m.data.begin() + (kFq3NanBlock + 1) * kBlockBytes);
  f.values.erase(f.values.begin() + kFq3NanBlock * kBlockValues, f.values.begin() + (kFq3NanBlock + 1) * kBlockValues);
  f.m.name = "FQ3 reference blocks (finite)";
  return f;
}

}  // namespace fish::vktest
