// Span: a forward (see span.h). Its rows are checked per sequence (ids,
// consecutive positions, no gap, within the capacity), cut into submissions
// of at most `tokens` rows, each one command buffer and one fence wait. A
// submission whose rows are all of one sequence is the one-sequence forward
// (the ctrl block's pos0 and page table: the same recorded decode for every
// sequence); rows of several sequences go with a row table of (position, page
// table) that the RoPE / KV-store and attention kernels read per row, the
// matrices still read once for all rows. The pages the rows write are made
// the sequences' own (taken, or copied when shared) and the page tables
// uploaded before the first submission. The logits of the rows asked for come
// from the head in the same submission.
#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <tuple>

#include "commands.h"
#include "span.h"

namespace fish::vk {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool Span::Shape::operator<(const Shape& o) const {
  return std::tie(n_tok, head_rows, head_last, narrow, multi) <
         std::tie(o.n_tok, o.head_rows, o.head_last, o.narrow, o.multi);
}

const float* Span::forward(const Forward& fw) {
  const int n_tok = fw.n_tok, n_seq = shape_.n_seq;
  if (!fw.x || n_tok < 1 || (!fw.pos && fw.pos0 < 0))
    throw Failure(FailKind::InvalidArgument, "span_forward: needs x, n_tok >= 1 and positions >= 0");
  // The rows: the caller's sequences and positions, or sequence 0 from pos0.
  row_seq_.resize(size_t(n_tok));
  row_pos_.resize(size_t(n_tok));
  row_want_.resize(size_t(n_tok));
  int n_want = 0;
  for (int t = 0; t < n_tok; ++t) {
    const int q = fw.seq ? fw.seq[t] : 0;
    const int64_t p = fw.pos ? int64_t(fw.pos[t]) : int64_t(fw.pos0) + t;
    if (q < 0 || q >= n_seq)
      throw Failure(FailKind::InvalidArgument, "span_forward: row " + std::to_string(t) + " is sequence " +
                                                   std::to_string(q) + ", outside 0.." + std::to_string(n_seq - 1));
    if (p < 0 || p >= INT_MAX)
      throw Failure(FailKind::InvalidArgument, "span_forward: needs x, n_tok >= 1 and positions >= 0");
    row_seq_[size_t(t)] = q;
    row_pos_[size_t(t)] = int32_t(p);
    const bool want = fw.logits_rows ? fw.logits_rows[t] != 0 : fw.logits && t == n_tok - 1;
    row_want_[size_t(t)] = want ? 1 : 0;
    n_want += want ? 1 : 0;
  }
  if (n_want > 0 && !head_)
    throw Failure(FailKind::InvalidArgument, "span_forward: logits asked for, but no head is attached (span_set_head)");
  // Per sequence: consecutive positions, the first at or before its length, all within the capacity.
  for (int t = 0; t < n_tok; ++t) first_pos_[size_t(row_seq_[size_t(t)])] = -1;
  bool one_seq = true;
  auto of = [&](int q) { return n_seq > 1 ? " of sequence " + std::to_string(q) : std::string(); };
  for (int t = 0; t < n_tok; ++t) {
    const int q = row_seq_[size_t(t)], p = row_pos_[size_t(t)];
    one_seq = one_seq && q == row_seq_[0];
    if (first_pos_[size_t(q)] < 0) {
      if (p > kv_len_[size_t(q)])
        throw Failure(FailKind::Range, "span_forward: position " + std::to_string(p) + " would leave a gap after the " +
                                           std::to_string(kv_len_[size_t(q)]) + " cached positions" + of(q));
      first_pos_[size_t(q)] = p;
    } else if (p != last_pos_[size_t(q)] + 1) {
      throw Failure(FailKind::InvalidArgument, "span_forward: row " + std::to_string(t) + " is at position " +
                                                   std::to_string(p) + " after " + std::to_string(last_pos_[size_t(q)]) +
                                                   of(q) + " (a sequence's rows are consecutive positions)");
    }
    last_pos_[size_t(q)] = p;
  }
  for (int t = 0; t < n_tok; ++t) {
    const int q = row_seq_[size_t(t)];
    if (int64_t(last_pos_[size_t(q)]) + 1 > capacity_)
      throw Failure(FailKind::Range, "span_forward: positions up to " + std::to_string(int64_t(last_pos_[size_t(q)]) + 1) +
                                         " exceed the KV capacity " + std::to_string(capacity_) +
                                         (n_seq > 1 ? " (sequence " + std::to_string(q) + ")" : "") +
                                         " (span_kv_reserve first)");
  }
  const bool fill = ctx_.cfg->bench_fill_kv && n_tok > 1 && one_seq;
  if (fill && n_want > 1)
    throw Failure(FailKind::Unsupported, "span_forward: FISH_VK_BENCH_FILL_KV gives no logits of several rows");
  // The pages the rows write, each sequence's own (OutOfMemory here changes nothing), then on the device.
  std::vector<std::array<int, 3>> written;
  for (int t = 0; t < n_tok; ++t) {
    const int q = row_seq_[size_t(t)];
    if (first_pos_[size_t(q)] >= 0 && row_pos_[size_t(t)] == first_pos_[size_t(q)])
      written.push_back({q, first_pos_[size_t(q)], last_pos_[size_t(q)]});
  }
  own_pages(written);
  sync_pages();

  const double t0 = now_s();
  for (int t = 0; t < n_tok; ++t) {  // positions at and after a sequence's first row are about to be replaced
    const size_t q = size_t(row_seq_[size_t(t)]);
    kv_len_[q] = std::min(kv_len_[q], first_pos_[q]);
  }
  logits_count_ = n_want;
  if (fill) {  // FISH_VK_BENCH_FILL_KV: benchmarks only (vk_config.h)
    const int q = row_seq_[0];
    fill_kv(q, first_pos_[size_t(q)], n_tok);
    kv_len_[size_t(q)] = last_pos_[size_t(q)] + 1;
    return n_want ? static_cast<const float*>(head_rb_.mapped) : nullptr;
  }
  const size_t E = size_t(shape_.n_embd), V = size_t(head_rows());
  const int batch = int(arena_.tokens);
  // The logits of one submission are read where the head wrote them; of several, gathered here.
  int with_rows = 0;
  for (int done = 0; done < n_tok; done += batch)
    with_rows += std::any_of(row_want_.begin() + done, row_want_.begin() + std::min(n_tok, done + batch),
                             [](uint8_t w) { return w != 0; });
  if (with_rows > 1) logits_host_.resize(size_t(n_want) * V);
  try {
    std::vector<float> out(fw.x_out && n_tok > batch ? size_t(n_tok) * E : 0);
    size_t gathered = 0;  // logits rows so far
    for (int done = 0; done < n_tok; done += batch) {
      Submission b;
      b.x = fw.x + size_t(done) * E;
      b.n = std::min(batch, n_tok - done);
      const int32_t* rq = row_seq_.data() + done;
      if (std::all_of(rq, rq + b.n, [&](int32_t q) { return q == rq[0]; })) {
        b.seq = rq[0], b.pos0 = row_pos_[size_t(done)];
      } else {
        b.seq = -1, b.rseq = rq, b.rpos = row_pos_.data() + done;
      }
      b.want = row_want_.data() + done;
      b.n_want = int(std::count(b.want, b.want + b.n, uint8_t(1)));
      run_batch(b, out.empty() ? nullptr : out.data() + size_t(done) * E);
      if (b.n_want > 0 && with_rows > 1) {
        std::memcpy(logits_host_.data() + gathered * V, head_rb_.mapped, size_t(b.n_want) * V * 4);
        gathered += size_t(b.n_want);
      }
    }
    // x_out is written only once every submission succeeded.
    if (fw.x_out && n_tok <= batch) {
      const double tc = now_s();
      std::memcpy(fw.x_out, readback_.mapped, size_t(n_tok) * E * 4);
      if (n_tok == 1) profile_->add_decode_host(0, 0, now_s() - tc);
    } else if (fw.x_out) {
      std::memcpy(fw.x_out, out.data(), out.size() * 4);
    }
  } catch (...) {
    for (int t = 0; t < n_tok; ++t) {
      const size_t q = size_t(row_seq_[size_t(t)]);
      kv_len_[q] = std::min(kv_len_[q], first_pos_[q]);
    }
    throw;
  }
  for (int t = 0; t < n_tok; ++t) {
    const size_t q = size_t(row_seq_[size_t(t)]);
    kv_len_[q] = last_pos_[q] + 1;
  }
  profile_->add_forward(n_tok, now_s() - t0);
  if (n_want == 0) return nullptr;
  return with_rows > 1 ? logits_host_.data() : static_cast<const float*>(head_rb_.mapped);
}

bool Span::narrow_attention(int n_tok, int n_kv) const {
  return narrow_heads_ && n_tok <= int(MatmulKernels::kMaxMatvecTokens) && uint32_t(n_kv) <= narrow_max_kv_;
}

void Span::run_batch(const Submission& b, float* out) {
  const double t_prep = now_s();
  const int n = b.n;
  const bool multi = b.seq < 0;
  uint32_t n_kv = 0;  // the longest context a row sees
  if (multi) {
    for (int t = 0; t < n; ++t) n_kv = std::max(n_kv, uint32_t(b.rpos[t]) + 1);
  } else {
    n_kv = uint32_t(b.pos0 + n);
  }
  // Attention splits along the context: decode and small batches split so
  // that ~attn_split positions go to each workgroup; prefill has a workgroup
  // per (token, KV head) already. Rows of several sequences are decode rows
  // (a prefill chunk among them is the exception): they split up to the
  // partial slots.
  uint32_t splits = 1;
  if (n <= int(multi ? kPartSlots : MatmulKernels::kMaxMatvecTokens)) {
    const uint32_t cap = std::min<uint32_t>(uint32_t(ctx_.cfg->attn_max_splits), kPartSlots / uint32_t(n));
    splits = std::clamp<uint32_t>((n_kv + uint32_t(ctx_.cfg->attn_split) - 1) / uint32_t(ctx_.cfg->attn_split), 1, cap);
  }
  const uint32_t split_len = (n_kv + splits - 1) / splits;
  Shape sh;
  sh.n_tok = n;
  sh.head_rows = b.n_want;
  sh.head_last = b.n_want == 1 && b.want[n - 1];
  sh.narrow = narrow_attention(n, int(n_kv));
  sh.multi = multi;
  auto* c = static_cast<uint32_t*>(staging_.mapped);
  std::memset(c, 0, ctrl::kWords * 4);
  c[ctrl::kAttnArgs] = attn_shape(sh.narrow).attn_groups();
  c[ctrl::kAttnArgs + 1] = splits;
  c[ctrl::kAttnArgs + 2] = uint32_t(n);
  c[ctrl::kPos0] = multi ? 0u : uint32_t(b.pos0);
  c[ctrl::kPt] = multi ? 0u : uint32_t(b.seq) * pt_stride_;
  c[ctrl::kSplits] = splits;
  c[ctrl::kSplitLen] = split_len;
  const size_t E = size_t(shape_.n_embd);
  std::memcpy(c + ctrl::kWords, b.x, size_t(n) * E * 4);
  if (n <= int(MatmulKernels::kMaxSpanMatvecTokens)) {
    // Layer 0's attention rmsnorm, as the matvec epilogues hand it to later
    // layers: x·attn_norm after the n rows of x, 1/rms per token in the ctrl block.
    float* xg = reinterpret_cast<float*>(c + ctrl::kWords) + size_t(n) * E;
    auto* inv = reinterpret_cast<float*>(c + ctrl::kInvAttn);
    for (int t = 0; t < n; ++t) {
      const float* xt = b.x + size_t(t) * E;
      double ss = 0;
      for (size_t i = 0; i < E; ++i) ss += double(xt[i]) * xt[i];
      inv[t] = float(1.0 / std::sqrt(ss / double(E) + double(shape_.norm_eps)));
      for (size_t i = 0; i < E; ++i) xg[size_t(t) * E + i] = xt[i] * norm0_[i];
    }
  }
  if (multi || (sh.head_rows > 0 && !sh.head_last)) {
    // The row table (ArenaLayout::meta): (position, page table) per row, the rows whose logits are wanted.
    auto* meta = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(staging_.mapped) + staging_meta_);
    if (multi)
      for (int t = 0; t < n; ++t) {
        meta[2 * t] = uint32_t(b.rpos[t]);
        meta[2 * t + 1] = uint32_t(b.rseq[t]) * pt_stride_;
      }
    uint32_t* list = meta + 2 * size_t(arena_.tokens);
    for (int t = 0, k = 0; t < n; ++t)
      if (b.want[t]) list[k++] = uint32_t(t);
  }
  if (sh.head_rows > 0) ensure_head_rows(sh.head_rows);
  VkCommandBuffer cmd = recording_for(sh);
  const double t_submit = now_s();
  submit_wait(*ctx_.dev, cmd, fence_, ctx_.cfg->spin && !ctx_.dev->caps().cpu_device);
  if (n == 1) profile_->add_decode_host(t_submit - t_prep, now_s() - t_submit, 0);
  profile_->add_submit();
  if (profile_->level() > 0) profile_->add_submission(n);
  if (out) std::memcpy(out, readback_.mapped, size_t(n) * E * 4);
}

SpanKernelShape Span::attn_shape(bool narrow) const {
  SpanKernelShape s = kshape_;
  if (narrow) s.wg_heads = narrow_heads_;
  return s;
}

}  // namespace fish::vk
