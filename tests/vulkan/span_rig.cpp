// SpanRig and the CPU references of the span kernels (see span_rig.h).
#include "span_rig.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fp16.h"

namespace fish::vktest {

using namespace fish::vk;

namespace {
constexpr VkBufferUsageFlags kUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
}

SpanRig::SpanRig(VulkanBackend& be, uint64_t arena_words, uint64_t kv_words, uint64_t param_words, uint64_t rope_words)
    : be_(be) {
  Memory& m = *be.memory();
  arena_ = m.create(std::max<uint64_t>(arena_words, 4) * 4, MemKind::Device, kUsage, "rig arena");
  kv_ = m.create(std::max<uint64_t>(kv_words, 4) * 4, MemKind::Device, kUsage, "rig kv");
  params_ = m.create(std::max<uint64_t>(param_words, 4) * 4, MemKind::Device, kUsage, "rig params");
  rope_ = m.create(std::max<uint64_t>(rope_words, 4) * 4, MemKind::Device, kUsage, "rig rope");
  pt_ = m.create(kPtWords * 4, MemKind::Device, kUsage, "rig page tables");
  aux_set_ = be.pipelines()->allocate_set(be.span_kernels()->aux_layout());
  const VkBuffer bufs[6] = {arena_.buffer, kv_.buffer, params_.buffer, rope_.buffer, arena_.buffer, pt_.buffer};
  const uint64_t offs[6] = {0, 0, 0, 0, 0, 0};
  const uint64_t ranges[6] = {arena_.size, kv_.size, params_.size, rope_.size, arena_.size, pt_.size};
  be.pipelines()->write_set(aux_set_, 6, bufs, offs, ranges);
  run([&](VkCommandBuffer cmd) { be_.device()->fns().vkCmdFillBuffer(cmd, arena_.buffer, 0, VK_WHOLE_SIZE, 0); });
  std::vector<uint32_t> identity(kPtWords);
  for (uint32_t i = 0; i < kPtWords; ++i) identity[i] = i;
  put(pt_, 0, identity);
}

SpanRig::~SpanRig() {
  be_.pipelines()->free_set(aux_set_);
  for (VkDescriptorSet s : mm_sets_) be_.pipelines()->free_set(s);
  for (Buffer* b : {&arena_, &kv_, &params_, &rope_, &pt_}) be_.memory()->destroy(*b);
}

VkDescriptorSet SpanRig::matmul_set(const WeightChunk& c, const WeightChunk* second) {
  VkDescriptorSet s = be_.pipelines()->allocate_set(be_.kernels()->span_layout());
  const WeightChunk& c2 = second ? *second : c;
  const VkBuffer bufs[6] = {c.buf.buffer, arena_.buffer, params_.buffer, arena_.buffer, arena_.buffer, c2.buf.buffer};
  const uint64_t offs[6] = {0, 0, 0, 0, 0, 0};
  const uint64_t ranges[6] = {c.buf.size, arena_.size, params_.size, arena_.size, arena_.size, c2.buf.size};
  be_.pipelines()->write_set(s, 6, bufs, offs, ranges);
  mm_sets_.push_back(s);
  return s;
}

void SpanRig::put(Buffer& b, uint64_t off, const void* words, uint64_t n_words) {
  if (n_words == 0) return;
  Buffer st = be_.memory()->create(n_words * 4, MemKind::Upload, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, "rig upload");
  std::memcpy(st.mapped, words, n_words * 4);
  run([&](VkCommandBuffer cmd) {
    const VkBufferCopy r{0, off * 4, n_words * 4};
    be_.device()->fns().vkCmdCopyBuffer(cmd, st.buffer, b.buffer, 1, &r);
  });
  be_.memory()->destroy(st);
}

std::vector<uint32_t> SpanRig::get_words(Buffer& b, uint64_t off, uint64_t n_words) {
  Buffer st = be_.memory()->create(std::max<uint64_t>(n_words, 1) * 4, MemKind::Readback,
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT, "rig readback");
  run([&](VkCommandBuffer cmd) {
    const VkBufferCopy r{off * 4, 0, n_words * 4};
    be_.device()->fns().vkCmdCopyBuffer(cmd, b.buffer, st.buffer, 1, &r);
    auto mb = vk_init<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    be_.device()->fns().vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                                             0, nullptr, 0, nullptr);
  });
  std::vector<uint32_t> out(n_words);
  std::memcpy(out.data(), st.mapped, n_words * 4);
  be_.memory()->destroy(st);
  return out;
}

std::vector<float> SpanRig::get(Buffer& b, uint64_t off, uint64_t n_words) {
  const auto w = get_words(b, off, n_words);
  std::vector<float> out(w.size());
  std::memcpy(out.data(), w.data(), w.size() * 4);
  return out;
}

double SpanRig::run(const std::function<void(VkCommandBuffer)>& rec) {
  Submitter& s = *be_.submitter();
  VkCommandBuffer cmd = s.begin();
  s.barrier(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
            VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
  s.mark_begin();
  rec(cmd);
  s.mark_end();
  s.barrier(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
            VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
  s.submit_and_wait();
  return s.last_gpu_seconds();
}

// ---- CPU references ---------------------------------------------------------------------

float round_f16(float v) { return fish::fp16_to_fp32(fish::fp32_to_fp16(v)); }

std::vector<float> rope_table(int n_pos, int n_rot, double base, double scale, const float* freqs) {
  const int half = n_rot / 2;
  std::vector<float> t(std::max<size_t>(4, size_t(n_pos) * size_t(half) * 2));
  for (int p = 0; p < n_pos; ++p)
    for (int i = 0; i < half; ++i) {
      const double th = p * std::pow(base, -2.0 * i / n_rot) / (freqs ? double(freqs[i]) : 1.0) * scale;
      t[(size_t(p) * half + i) * 2] = float(std::cos(th));
      t[(size_t(p) * half + i) * 2 + 1] = float(std::sin(th));
    }
  return t;
}

void ref_rmsnorm(const float* x, const float* w, float* y, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) y[i] = float(x[i] * inv * w[i]);
}

void ref_prep_head(float* v, int d, const float* bias, const float* norm_w, float eps, const float* rope, int pos,
                   int n_rot, bool neox, float scale) {
  if (bias)
    for (int i = 0; i < d; ++i) v[i] += bias[i];
  if (norm_w) ref_rmsnorm(v, norm_w, v, d, eps);
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const double c = rope[(size_t(pos) * half + i) * 2], s = rope[(size_t(pos) * half + i) * 2 + 1];
    const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const double x = v[a], y = v[b];
    v[a] = float(x * c - y * s);
    v[b] = float(x * s + y * c);
  }
  for (int i = 0; i < d; ++i) v[i] *= scale;
}

void ref_attention(const float* q, const float* k, const float* v, int n_kv, int n_head, int n_head_kv, int d,
                   float* out) {
  const int group = n_head / n_head_kv, kd = n_head_kv * d;
  std::vector<double> w(static_cast<size_t>(n_kv));
  for (int h = 0; h < n_head; ++h) {
    const int g = h / group;
    double mx = -1e300;
    for (int j = 0; j < n_kv; ++j) {
      double s = 0;
      for (int i = 0; i < d; ++i) s += double(q[h * d + i]) * k[size_t(j) * kd + g * d + i];
      w[size_t(j)] = s;
      mx = std::max(mx, s);
    }
    double sum = 0;
    for (auto& e : w) sum += (e = std::exp(e - mx));
    for (int i = 0; i < d; ++i) {
      double acc = 0;
      for (int j = 0; j < n_kv; ++j) acc += w[size_t(j)] * v[size_t(j) * kd + g * d + i];
      out[h * d + i] = float(acc / sum);
    }
  }
}

}  // namespace fish::vktest
