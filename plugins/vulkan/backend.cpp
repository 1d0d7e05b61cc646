// VulkanBackend: lazy open, weights, stage-1 matmuls (see backend.h).
#include "backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

namespace fish::vk {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kWeightPad = 32;          // zeroed bytes after the last row: the funnel reads look ahead
constexpr uint64_t kStagingBytes = 16 * kMiB;
// The roles whose int8 Q4_K / Q5_K span matvecs take units of 64 elements on
// GPUs (bits 1 << SpanRole): q/k/v and gate/up, the set that measured fastest
// (docs/experiments/vulkan-decode-steps.md).
constexpr uint32_t kDefaultU64 = (1u << kRoleQkv) | (1u << kRoleGateUp);

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string mb(uint64_t bytes) { return std::to_string((bytes + kMiB / 2) / kMiB) + " MB"; }

LogFn default_log(int verbose) {
  if (verbose <= 0) return nullptr;
  const int max_level = verbose >= 2 ? 3 : 1;
  return [max_level](int level, const std::string& msg) {
    if (level <= max_level) std::fprintf(stderr, "fish_vulkan: %s\n", msg.c_str());
  };
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ProbeReport probe_devices(const VkConfig& cfg, const LogFn& log) {
  ProbeReport r;
  if (!cfg.error.empty()) {
    r.error = cfg.error;
    return r;
  }
  if (cfg.gpu == VkConfig::GpuMode::Off) {
    r.error = "GPU use is off (FISH_GPU)";
    return r;
  }
  try {
    const Instance& inst = shared_instance(cfg, log);
    r.devices = inst.candidates(cfg);
    r.ok = true;
    r.chosen = choose_device(r.devices, cfg.device_index, &r.error);
  } catch (const Failure& f) {
    r.error = f.what();
  } catch (const std::exception& e) {
    r.error = std::string("unexpected error while probing Vulkan devices: ") + e.what();
  }
  return r;
}

VulkanBackend::VulkanBackend(Options opt) : opt_(std::move(opt)), cfg_(opt_.config) {
  // FISH_VK_PIPELINE_STATS logs its lines as warnings: on stderr without a host logger.
  if (!opt_.log) opt_.log = default_log(cfg_.pipeline_stats ? std::max(cfg_.verbose, 1) : cfg_.verbose);
}

VulkanBackend::~VulkanBackend() { teardown(); }

bool VulkanBackend::fail(FailKind k, const std::string& msg) {
  error_ = msg;
  error_kind_ = k;
  if (k == FailKind::Device && state_ == State::Open) {
    // A device error is sticky: the engine stops using this backend.
    state_ = State::Failed;
    error_ = "device error (the backend is unusable now): " + msg;
  }
  // The caller gets the failure as a status; only a lost device is also an
  // error in the host's log (shown without FISH_GPU_VERBOSE).
  if (opt_.log) opt_.log(state_ == State::Failed ? 0 : 2, error_);
  return false;
}

bool VulkanBackend::fail(const Failure& f) { return fail(f.kind(), f.what()); }

bool VulkanBackend::open() {
  if (state_ == State::Open) return true;
  if (state_ == State::Failed) return false;
  try {
    if (!cfg_.error.empty()) throw Failure(FailKind::NoDevice, cfg_.error);
    if (cfg_.gpu == VkConfig::GpuMode::Off) throw Failure(FailKind::NoDevice, "GPU use is off (FISH_GPU)");
    instance_ = &shared_instance(cfg_, opt_.log);
    const auto pds = instance_->physical_devices();
    const auto cands = instance_->candidates(cfg_);
    const int forced = opt_.device_index >= 0 ? opt_.device_index : cfg_.device_index;
    std::string why;
    const int idx = choose_device(cands, forced, &why);
    if (idx < 0) throw Failure(FailKind::NoDevice, why);
    device_ = std::make_unique<Device>(*instance_, pds[size_t(idx)], cands[size_t(idx)], opt_.log, cfg_.pipeline_stats);
    memory_ = std::make_unique<Memory>(*device_, cfg_, opt_.memory_budget, opt_.log);
    pipelines_ = std::make_unique<Pipelines>(*device_);
    submitter_ = std::make_unique<Submitter>(*device_);
    kernels_ = std::make_unique<MatmulKernels>(*device_, *pipelines_);
    span_kernels_ = std::make_unique<SpanKernels>(*device_, *pipelines_);
    submitter_->set_spin(cfg_.spin && !device_->caps().cpu_device);
    kernels_->set_override(uint32_t(cfg_.mv_rows), uint32_t(cfg_.mv_wg));
    for (uint32_t r = 0; r < kRoles; ++r) kernels_->set_span_shape(SpanRole(r), cfg_.span_mv[r]);
    // int8 activations by default where the device accelerates 4x8-bit packed
    // dot products (NVIDIA, recent AMD/Intel: faster decode and prefill, and
    // the CPU's int8 arithmetic), and on CPU implementations with the feature
    // (lavapipe: there they compute the engine's CPU results, no slower).
    // f32 elsewhere. FISH_VK_INT8=0|1 forces either.
    const DeviceCaps& dc = device_->caps();
    kernels_->set_int8(cfg_.int8 == 1 || (cfg_.int8 < 0 && (dc.int_dot_accel || (dc.cpu_device && dc.int_dot))));
    // Prefill on tensor cores wherever the device has them (FISH_VK_COOPMAT=0: the tiled kernels).
    kernels_->set_coopmat(cfg_.coopmat);
    // Units of 64 for some roles' Q4_K / Q5_K span matvecs on GPUs; CPU
    // implementations keep 32 (their float summation order, like their Q8_K rows).
    kernels_->set_span_u64(cfg_.span_u64 >= 0 ? uint32_t(cfg_.span_u64) : dc.cpu_device ? 0u : kDefaultU64);
    submitter_->set_profiling(cfg_.profile_level > 0);
    state_ = State::Open;
    return true;
  } catch (const Failure& f) {
    teardown();
    state_ = State::Failed;
    error_ = f.what();
    error_kind_ = f.kind() == FailKind::Device ? FailKind::NoDevice : f.kind();
  } catch (const std::exception& e) {
    teardown();
    state_ = State::Failed;
    error_ = std::string("opening the Vulkan device: ") + e.what();
    error_kind_ = FailKind::NoDevice;
  }
  if (opt_.log) opt_.log(2, "unavailable: " + error_);  // the host reports a failed open itself
  return false;
}

bool VulkanBackend::ensure_open() {
  if (state_ == State::Open) return true;
  if (state_ == State::Closed) return open();
  return false;  // error_ still holds the sticky reason
}

void VulkanBackend::teardown() {
  if (device_) device_->fns().vkDeviceWaitIdle(device_->handle());
  for (Span* sp : spans_) delete sp;  // before the weights they use
  spans_.clear();
  for (Weight* w : weights_) free_weight(w);
  weights_.clear();
  if (memory_) {
    memory_->destroy(x_dev_);
    memory_->destroy(y_dev_);
    memory_->destroy(x_up_);
    memory_->destroy(y_down_);
  }
  span_kernels_.reset();
  kernels_.reset();
  submitter_.reset();
  pipelines_.reset();
  memory_.reset();
  device_.reset();
  instance_ = nullptr;
}

std::string VulkanBackend::status() const {
  switch (state_) {
    case State::Closed: return "not opened";
    case State::Open:
      return "open: " + device_->info().name + ": " + device_->detail() +
             (kernels_->int8()           ? "; matmul: int8 x, integer dot products (FISH_VK_INT8=0: f32)"
              : device_->caps().int_dot ? "; matmul: f32 x (int8 dot products available: FISH_VK_INT8=1)"
                                        : "; matmul: f32 x");
    case State::Failed: return "failed: " + error_;
  }
  return "";
}

std::string VulkanBackend::describe() {
  if (state_ != State::Open) return "vulkan: " + status();
  std::map<std::string, int> count;
  uint64_t bytes = 0;
  for (const Weight* w : weights_) {
    ++count[w->type->name];
    bytes += w->alloc_bytes;
  }
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [name, n] : count) order.emplace_back(-n, name);
  std::sort(order.begin(), order.end());
  std::string s = "vulkan " + device_->info().name + ": " + mb(bytes) + " weights";
  for (const auto& [n, name] : order) s += ", " + std::to_string(-n) + " x " + name;
  if (kernels_->int8()) s += " (int8 activations)";
  for (const Span* sp : spans_) s += "; " + sp->describe();
  return s;
}

std::string VulkanBackend::profile() {
  std::string spans;
  for (Span* sp : spans_) {
    const std::string p = sp->profile();
    if (!p.empty()) spans += (spans.empty() ? "" : "\n") + p;
  }
  if (prof_submits_ == 0) return spans;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "vulkan: %llu submits, %llu matvec + %llu tiled dispatches, %.1f MB of weights read, wall %.3f ms",
                (unsigned long long)prof_submits_, (unsigned long long)prof_matvec_, (unsigned long long)prof_tiled_,
                double(prof_weight_bytes_) / 1e6, prof_wall_s_ * 1e3);
  std::string s = buf;
  if (prof_gpu_s_ > 0) {
    std::snprintf(buf, sizeof buf, "\nvulkan: kernels %.3f ms on the device (%.1f GB/s of weights)", prof_gpu_s_ * 1e3,
                  double(prof_weight_bytes_) / prof_gpu_s_ / 1e9);
    s += buf;
  }
  prof_submits_ = prof_matvec_ = prof_tiled_ = prof_weight_bytes_ = 0;
  prof_gpu_s_ = prof_wall_s_ = 0;
  return spans.empty() ? s : s + "\n" + spans;
}

bool VulkanBackend::memory_free(uint64_t* out) {
  if (!ensure_open()) return false;
  *out = memory_->memory_free();
  return true;
}

bool VulkanBackend::bytes_resident(uint64_t* out) {
  *out = state_ == State::Open ? memory_->resident() : 0;
  return true;
}

bool VulkanBackend::supports(uint32_t ggml_type, bool* out) {
  if (state_ == State::Failed) return false;
  *out = matmul_type(ggml_type) != nullptr;
  return true;
}

uint64_t VulkanBackend::binding_limit() const {
  const DeviceCaps& c = device_->caps();
  uint64_t lim = std::min<uint64_t>({c.max_storage_range, c.max_alloc, 0xFFFFFFC0ull});
  if (test_chunk_limit_) lim = std::min(lim, test_chunk_limit_);
  return lim;
}

void VulkanBackend::set_test_limits(uint64_t max_chunk_bytes, uint64_t max_scratch_bytes) {
  test_chunk_limit_ = max_chunk_bytes;
  test_scratch_limit_ = max_scratch_bytes;
}

void VulkanBackend::set_profiling(bool on) {
  cfg_.profile_level = on ? std::max(1, cfg_.profile_level) : 0;
  if (submitter_) submitter_->set_profiling(on);
}

double VulkanBackend::last_gpu_seconds() const { return submitter_ ? submitter_->last_gpu_seconds() : 0.0; }

void VulkanBackend::free_weight(Weight* w) {
  for (WeightChunk& c : w->chunks) {
    if (c.set && pipelines_) pipelines_->free_set(c.set);
    if (memory_) memory_->destroy(c.buf);
  }
  delete w;
}

Weight* VulkanBackend::upload(const WeightUpload& in) {
  if (!ensure_open()) return nullptr;
  const std::string name = in.name && *in.name ? in.name : "(unnamed)";
  const MatmulType* t = matmul_type(in.type);
  if (!t) {
    fail(FailKind::Unsupported, name + ": GGUF type " + std::to_string(in.type) + " has no Vulkan kernel");
    return nullptr;
  }
  if (in.n_in <= 0 || in.n_out <= 0 || in.n_in % t->block_elems != 0 || in.n_in > (int64_t(1) << 30) ||
      in.n_out > (int64_t(1) << 31) || !in.data) {
    fail(FailKind::InvalidArgument, name + ": bad shape for " + t->name + " (n_in " + std::to_string(in.n_in) +
                                        ", n_out " + std::to_string(in.n_out) + ", data " + (in.data ? "set" : "null") + ")");
    return nullptr;
  }
  const uint64_t row_bytes = uint64_t(in.n_in) / t->block_elems * t->block_bytes;
  const int64_t n_mat = std::max<int64_t>(1, in.n_mat);
  const uint64_t n_rows = uint64_t(in.n_out) * uint64_t(n_mat);  // the matrices' rows, one after another
  if (in.n_mat < 0 || n_mat > 65536 || n_rows > (uint64_t(1) << 31) || in.nbytes != row_bytes * n_rows) {
    fail(FailKind::InvalidArgument, name + ": nbytes " + std::to_string(in.nbytes) + " != " + std::to_string(n_mat) +
                                        " x " + std::to_string(in.n_out) + " rows x " + std::to_string(row_bytes) + " bytes");
    return nullptr;
  }
  const uint64_t limit = binding_limit();
  if (row_bytes + kWeightPad > limit) {
    fail(FailKind::Unsupported, name + ": one row (" + std::to_string(row_bytes) + " bytes) exceeds the device's binding limit");
    return nullptr;
  }
  const uint64_t max_rows = std::min<uint64_t>((limit - kWeightPad) / row_bytes,
                                               uint64_t(MatmulKernels::kTileRows) * device_->caps().max_wg_count_x);

  auto* w = new Weight;
  w->type = t;
  w->name = name;
  w->n_in = in.n_in;
  w->n_out = in.n_out;
  w->n_mat = n_mat;
  w->row_bytes = row_bytes;
  w->nbytes = in.nbytes;
  Buffer staging;
  try {
    // Where device memory is host-visible (integrated GPUs, lavapipe) the rows are
    // written in place; otherwise through a staging buffer.
    const bool direct = memory_->device_memory_mappable();
    for (uint64_t r0 = 0; r0 < n_rows; r0 += max_rows) {
      WeightChunk c;
      c.row0 = uint32_t(r0);
      c.rows = uint32_t(std::min<uint64_t>(max_rows, n_rows - r0));
      const uint64_t size = round_up(c.rows * row_bytes + kWeightPad, 16);
      c.buf = memory_->create(size, direct ? MemKind::DeviceMapped : MemKind::Device,
                              VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, name);
      w->alloc_bytes += c.buf.alloc_size;
      w->chunks.push_back(c);
    }
    // The GGUF bytes, then zeros up to the padded size.
    const auto* src = static_cast<const uint8_t*>(in.data);
    auto fill = [&](const WeightChunk& c, uint64_t off, uint64_t n, uint8_t* dst) {
      const uint64_t data_begin = uint64_t(c.row0) * row_bytes, data_bytes = uint64_t(c.rows) * row_bytes;
      const uint64_t from_data = off < data_bytes ? std::min(n, data_bytes - off) : 0;
      if (from_data) std::memcpy(dst, src + data_begin + off, from_data);
      if (from_data < n) std::memset(dst + from_data, 0, n - from_data);
    };
    if (direct) {
      for (const WeightChunk& c : w->chunks) fill(c, 0, c.buf.size, static_cast<uint8_t*>(c.buf.mapped));
    } else {
      const uint64_t largest = w->chunks.front().buf.size;
      staging = memory_->create(std::min(largest, kStagingBytes), MemKind::Upload, VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                                name + " (upload staging)");
      for (const WeightChunk& c : w->chunks) {
        for (uint64_t off = 0; off < c.buf.size; off += staging.size) {
          const uint64_t n = std::min(staging.size, c.buf.size - off);
          fill(c, off, n, static_cast<uint8_t*>(staging.mapped));
          VkCommandBuffer cmd = submitter_->begin();
          VkBufferCopy region{0, off, n};
          device_->fns().vkCmdCopyBuffer(cmd, staging.buffer, c.buf.buffer, 1, &region);
          submitter_->submit_and_wait();
        }
      }
    }
    memory_->destroy(staging);
  } catch (const Failure& f) {
    memory_->destroy(staging);
    free_weight(w);
    fail(f);
    return nullptr;
  } catch (const std::exception& e) {
    memory_->destroy(staging);
    free_weight(w);
    fail(FailKind::Internal, name + ": " + e.what());
    return nullptr;
  }
  weights_.insert(w);
  if (opt_.log)
    opt_.log(3, "uploaded " + name + " (" + t->name + " " + std::to_string(n_mat) + " x " + std::to_string(in.n_out) + " x " + std::to_string(in.n_in) +
                    ", " + std::to_string(w->chunks.size()) + " chunk(s), " + mb(w->alloc_bytes) + ")");
  return w;
}

bool VulkanBackend::release(Weight* w) {
  if (!w || !live(w)) return fail(FailKind::InvalidArgument, "release: not a weight of this backend");
  for (const Span* sp : spans_)
    if (sp->uses(w)) return fail(FailKind::InvalidArgument, "release " + w->name + ": a span still uses it (destroy the span first)");
  weights_.erase(w);
  free_weight(w);
  if (weights_.empty() && spans_.empty()) {
    // Nothing left to multiply: give the scratch back too, so that a model's
    // unload leaves nothing of fish's in VRAM (bytes_resident() == 0).
    memory_->destroy(x_dev_);
    memory_->destroy(y_dev_);
    memory_->destroy(x_up_);
    memory_->destroy(y_down_);
  }
  return true;
}

void VulkanBackend::ensure_scratch(uint64_t x_bytes, uint64_t y_bytes) {
  const uint64_t limit = binding_limit();
  auto grow = [&](Buffer& dev, Buffer& host, uint64_t need, bool is_x) {
    if (dev && host && dev.size >= need) return;
    const uint64_t size = std::min(limit, std::max<uint64_t>(round_up(need, 64 * 1024), dev.size * 2));
    memory_->destroy(dev);
    memory_->destroy(host);
    const VkBufferUsageFlags dev_usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | (is_x ? VK_BUFFER_USAGE_TRANSFER_DST_BIT : VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
    dev = memory_->create(size, MemKind::Device, dev_usage, is_x ? "matmul input" : "matmul output");
    host = memory_->create(size, is_x ? MemKind::Upload : MemKind::Readback,
                           is_x ? VK_BUFFER_USAGE_TRANSFER_SRC_BIT : VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                           is_x ? "matmul input staging" : "matmul output staging");
    ++scratch_generation_;
  };
  grow(x_dev_, x_up_, x_bytes, true);
  grow(y_dev_, y_down_, y_bytes, false);
}

void VulkanBackend::bind_chunk(WeightChunk& c) {
  if (c.set && c.set_generation == scratch_generation_) return;
  if (!c.set) c.set = pipelines_->allocate_set(kernels_->layout());
  const VkBuffer bufs[3] = {c.buf.buffer, x_dev_.buffer, y_dev_.buffer};
  const uint64_t offs[3] = {0, 0, 0};
  const uint64_t ranges[3] = {c.buf.size, x_dev_.size, y_dev_.size};
  pipelines_->write_set(c.set, 3, bufs, offs, ranges);
  c.set_generation = scratch_generation_;
}

bool VulkanBackend::matmul(Weight* w, const float* x, int n_tok, float* y) { return matmul_group(&w, 1, x, n_tok, &y); }

bool VulkanBackend::matmul_group(Weight* const* ws, int n_w, const float* x, int n_tok, float* const* ys) {
  if (!ensure_open()) return false;
  if (!ws || n_w < 1 || !x || !ys || n_tok < 1)
    return fail(FailKind::InvalidArgument, "matmul: need at least one weight, x, y and n_tok >= 1");
  for (int i = 0; i < n_w; ++i) {
    if (!ws[i] || !live(ws[i])) return fail(FailKind::InvalidArgument, "matmul: weight " + std::to_string(i) + " is not a weight of this backend");
    if (!ys[i]) return fail(FailKind::InvalidArgument, "matmul: y " + std::to_string(i) + " is null");
    if (ws[i]->n_mat != 1)
      return fail(FailKind::InvalidArgument, "matmul: " + ws[i]->name + " holds " + std::to_string(ws[i]->n_mat) +
                                                 " matrices; matmul takes single matrices");
    if (ws[i]->n_in != ws[0]->n_in)
      return fail(FailKind::InvalidArgument, "matmul_group: " + ws[i]->name + " has n_in " + std::to_string(ws[i]->n_in) +
                                                 ", " + ws[0]->name + " has " + std::to_string(ws[0]->n_in));
  }
  try {
    return run_group(ws, n_w, x, n_tok, ys);
  } catch (const Failure& f) {
    return fail(f);
  } catch (const std::exception& e) {
    return fail(FailKind::Internal, std::string("matmul: ") + e.what());
  }
}

bool VulkanBackend::run_group(Weight* const* ws, int n_w, const float* x, int n_tok, float* const* ys) {
  const uint64_t n_in = uint64_t(ws[0]->n_in);
  uint64_t total_out = 0, weight_bytes = 0;
  for (int i = 0; i < n_w; ++i) {
    total_out += uint64_t(ws[i]->n_out);
    weight_bytes += ws[i]->nbytes;
  }
  // Tokens per submission: x and y of a batch must each fit one binding.
  uint64_t limit = binding_limit();
  if (test_scratch_limit_) limit = std::min(limit, test_scratch_limit_);
  // int8: x is quantised on the device once per activation
  // format the group's types need (Q8_K rows for K-quants, Q8_0 for Q4_0/Q8_0),
  // into x_dev_ after the f32 rows; types without an int8 kernel read x itself.
  const bool any_int8 = [&] {
    for (int i = 0; i < n_w; ++i)
      if (kernels_->int8_for(*ws[i]->type)) return true;
    return false;
  }();
  // A token's f32 x, plus (int8) its rows in both formats and their alignment.
  const uint64_t q_tok = any_int8 ? 2 * (uint64_t(MatmulKernels::q8_row_words(32, uint32_t(n_in))) * 4 + 256) : 0;
  const uint64_t per_tok = std::max(n_in * 4 + q_tok, total_out * 4);
  uint64_t tb = std::min<uint64_t>(uint64_t(n_tok), limit / per_tok);
  if (tb == 0)
    throw Failure(FailKind::Unsupported, "matmul: one token's input/output (" + std::to_string(per_tok) +
                                             " bytes) exceeds the device's binding limit");
  if (tb < uint64_t(n_tok) && tb > MatmulKernels::kTileTokens) tb = tb / MatmulKernels::kTileTokens * MatmulKernels::kTileTokens;

  const DeviceFns& f = device_->fns();
  for (uint64_t t0 = 0; t0 < uint64_t(n_tok); t0 += tb) {
    const uint32_t nt = uint32_t(std::min<uint64_t>(tb, uint64_t(n_tok) - t0));
    // Prefill on cooperative matrices reads f32 x (int8_for(type, nt)).
    bool int8 = false;
    for (int i = 0; i < n_w; ++i) int8 = int8 || kernels_->int8_for(*ws[i]->type, nt);
    const uint64_t x_bytes = nt * n_in * 4, y_bytes = nt * total_out * 4;
    // Word offsets of the quantised rows: [0] blocks of 256, [1] blocks of 32.
    const uint32_t q_bs[2] = {256, 32};
    uint32_t q_off[2] = {0, 0}, q_stride[2] = {0, 0};
    bool q_need[2] = {false, false};
    uint64_t x_total = x_bytes;
    if (int8) {
      for (int i = 0; i < n_w; ++i)
        if (kernels_->int8_for(*ws[i]->type, nt)) q_need[MatmulKernels::q8_block(*ws[i]->type) == 256 ? 0 : 1] = true;
      for (int k = 0; k < 2; ++k) {
        if (!q_need[k]) continue;
        x_total = round_up(x_total, 256);
        q_off[k] = uint32_t(x_total / 4);
        q_stride[k] = MatmulKernels::q8_row_words(q_bs[k], uint32_t(n_in));
        x_total += uint64_t(nt) * q_stride[k] * 4;
      }
    }
    ensure_scratch(x_total, y_bytes);
    const double t_start = now_s();
    std::memcpy(x_up_.mapped, x + t0 * n_in, x_bytes);
    VkCommandBuffer cmd = submitter_->begin();
    VkBufferCopy xr{0, 0, x_bytes};
    f.vkCmdCopyBuffer(cmd, x_up_.buffer, x_dev_.buffer, 1, &xr);
    submitter_->barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                        VK_ACCESS_SHADER_READ_BIT);
    submitter_->mark_begin();
    if (int8) {
      if (!q_set_ || q_set_generation_ != scratch_generation_) {
        if (!q_set_) q_set_ = pipelines_->allocate_set(kernels_->quant_layout());
        const VkBuffer b = x_dev_.buffer;
        const uint64_t o = 0, r = x_dev_.size;
        pipelines_->write_set(q_set_, 1, &b, &o, &r);
        q_set_generation_ = scratch_generation_;
      }
      for (int k = 0; k < 2; ++k) {
        if (!q_need[k]) continue;
        QuantPush qp;
        qp.n = uint32_t(n_in), qp.n_tok = nt, qp.x_off = 0, qp.x_stride = uint32_t(n_in);
        qp.q_off = q_off[k], qp.q_stride = q_stride[k];
        kernels_->record_quantize(cmd, q_set_, qp, q_bs[k], false);
      }
      submitter_->barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    }
    uint64_t region = 0;  // float offset of weight i's [nt, n_out_i] block in y
    for (int i = 0; i < n_w; ++i) {
      Weight* w = ws[i];
      const bool wi8 = int8 && kernels_->int8_for(*w->type, nt);
      const int k = wi8 && MatmulKernels::q8_block(*w->type) == 32 ? 1 : 0;
      for (WeightChunk& c : w->chunks) {
        bind_chunk(c);
        MatmulPush pc{uint32_t(n_in), c.rows, nt, uint32_t(n_in), 0, uint32_t(w->n_out), uint32_t(region + c.row0)};
        if (wi8) pc.x_stride = q_stride[k], pc.x_off = q_off[k];
        kernels_->record(cmd, *w->type, c.set, pc, wi8);
        (nt <= MatmulKernels::kMaxMatvecTokens ? prof_matvec_ : prof_tiled_)++;
      }
      region += uint64_t(nt) * uint64_t(w->n_out);
    }
    submitter_->mark_end();
    submitter_->barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                        VK_ACCESS_TRANSFER_READ_BIT);
    VkBufferCopy yr{0, 0, y_bytes};
    f.vkCmdCopyBuffer(cmd, y_dev_.buffer, y_down_.buffer, 1, &yr);
    submitter_->barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                        VK_ACCESS_HOST_READ_BIT);
    submitter_->submit_and_wait();
    region = 0;
    const auto* yd = static_cast<const float*>(y_down_.mapped);
    for (int i = 0; i < n_w; ++i) {
      const uint64_t n_out = uint64_t(ws[i]->n_out);
      std::memcpy(ys[i] + t0 * n_out, yd + region, nt * n_out * 4);
      region += nt * n_out;
    }
    ++prof_submits_;
    prof_weight_bytes_ += weight_bytes;
    prof_wall_s_ += now_s() - t_start;
    prof_gpu_s_ += submitter_->last_gpu_seconds();
  }
  return true;
}

}  // namespace fish::vk

// ---- spans ---------------------------------------------------------------------------

namespace fish::vk {

SpanContext VulkanBackend::span_context() {
  SpanContext c;
  c.dev = device_.get();
  c.mem = memory_.get();
  c.pipelines = pipelines_.get();
  c.matmul = kernels_.get();
  c.kernels = span_kernels_.get();
  c.cfg = &cfg_;
  c.log = opt_.log;
  return c;
}

bool VulkanBackend::check_span_in(const SpanIn& in, const char* what) {
  if (int(in.layers.size()) != in.n_layers || in.n_layers < 1)
    return fail(FailKind::InvalidArgument, std::string(what) + ": n_layers " + std::to_string(in.n_layers) + " with " +
                                               std::to_string(in.layers.size()) + " layer descriptions");
  // (A missing one is Span::validate's to name: which roles a layer has depends on its kind.)
  for (const SpanLayerIn& l : in.layers)
    for (const Weight* w : l.w)
      if (w && !live(w))
        return fail(FailKind::InvalidArgument, std::string(what) + ": a layer's weight is not a weight of this backend");
  return true;
}

bool VulkanBackend::span_bytes(const SpanIn& in, uint64_t* out) {
  if (!ensure_open()) return false;
  try {
    // The weights need not exist yet: the engine asks before uploading them.
    if (int(in.layers.size()) != in.n_layers || in.n_layers < 1)
      return fail(FailKind::InvalidArgument, "span_bytes: n_layers " + std::to_string(in.n_layers) + " with " +
                                                 std::to_string(in.layers.size()) + " layer descriptions");
    const SpanContext ctx = span_context();
    Span::validate(ctx, in, false);
    *out = Span::bytes_for(ctx, in, in.n_ctx);
    return true;
  } catch (const Failure& f) {
    return fail(f);
  } catch (const std::exception& e) {
    return fail(FailKind::Internal, std::string("span_bytes: ") + e.what());
  }
}

Span* VulkanBackend::span_create(const SpanIn& in) {
  if (!ensure_open()) return nullptr;
  try {
    if (!check_span_in(in, "span_create")) return nullptr;
    auto* sp = new Span(span_context(), in);
    spans_.insert(sp);
    return sp;
  } catch (const Failure& f) {
    fail(f);
  } catch (const std::exception& e) {
    fail(FailKind::Internal, std::string("span_create: ") + e.what());
  }
  return nullptr;
}

template <class F>
bool VulkanBackend::span_call(Span* s, const char* what, F&& f) {
  if (!ensure_open()) return false;
  if (!s || !live(s)) return fail(FailKind::InvalidArgument, std::string(what) + ": not a span of this backend");
  try {
    f();
    return true;
  } catch (const Failure& fl) {
    return fail(fl);
  } catch (const std::exception& e) {
    return fail(FailKind::Internal, std::string(what) + ": " + e.what());
  }
}

bool VulkanBackend::span_forward(Span* s, const Span::Forward& f, const float** logits) {
  return span_call(s, "span_forward", [&] {
    const float* l = s->forward(f);
    if (logits) *logits = l;
  });
}

bool VulkanBackend::span_set_head(Span* s, Weight* head, const float* norm) {
  return span_call(s, "span_set_head", [&] {
    if (head && !live(head)) throw Failure(FailKind::InvalidArgument, "span_set_head: the head is not a weight of this backend");
    s->set_head(head, norm);
  });
}

bool VulkanBackend::span_kv_truncate(Span* s, int seq, int n) {
  if (!ensure_open()) return false;
  if (!s || !live(s)) return fail(FailKind::InvalidArgument, "span_kv_truncate: not a span of this backend");
  try {
    s->truncate(seq, n);
    return true;
  } catch (const Failure& f) {
    return fail(f);
  }
}

bool VulkanBackend::span_kv_copy(Span* s, int src, int dst, int p0, int p1) {
  return span_call(s, "span_kv_copy", [&] { s->copy(src, dst, p0, p1); });
}

bool VulkanBackend::span_kv_reserve(Span* s, int n) {
  return span_call(s, "span_kv_reserve", [&] { s->reserve(n); });
}

bool VulkanBackend::span_kv_len(Span* s, int seq, int* out) {
  if (!ensure_open()) return false;
  if (!s || !live(s) || !out) return fail(FailKind::InvalidArgument, "span_kv_len: not a span of this backend");
  try {
    *out = s->kv_len(seq);
    return true;
  } catch (const Failure& f) {
    return fail(f);
  }
}

bool VulkanBackend::span_destroy(Span* s) {
  if (!s || !live(s)) return fail(FailKind::InvalidArgument, "span_destroy: not a span of this backend");
  spans_.erase(s);
  delete s;
  // The per-matmul scratch goes too (the next matmul re-creates it): the
  // engine destroys a span at unload or when it falls back to the CPU, and the
  // conformance suite expects bytes_resident() back at its value before the
  // span was created, though its per-matmul reference path grew the scratch.
  if (state_ == State::Open) {
    memory_->destroy(x_dev_);
    memory_->destroy(y_dev_);
    memory_->destroy(x_up_);
    memory_->destroy(y_down_);
  }
  return true;
}

}  // namespace fish::vk
