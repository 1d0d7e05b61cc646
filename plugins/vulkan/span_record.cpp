// Span: recording of one forward into a command buffer, and its profile
// (see span.h for the step list and what is fused when).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "backend.h"
#include "span.h"

namespace fish::vk {

void Span::record(VkCommandBuffer cmd, int n_tok, Mode m, bool stamps, bool head, bool narrow) {
  const DeviceFns& f = ctx_.dev->fns();
  SpanKernels& k = *ctx_.kernels;
  const uint32_t n = uint32_t(n_tok);
  const uint32_t E = uint32_t(shape_.n_embd), F = uint32_t(shape_.n_ff), D = uint32_t(shape_.head_dim);
  const uint32_t QD = uint32_t(shape_.n_head) * D, KD = uint32_t(shape_.n_head_kv) * D, QKV = QD + 2 * KD;
  const ArenaLayout& a = arena_;
  const bool per_stage = stamps && ctx_.cfg->profile_level >= 2;

  auto barrier = [&](VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
                     VkAccessFlags dst_access) {
    auto mb = vk_init<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = src_access;
    mb.dstAccessMask = dst_access;
    f.vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
  };
  auto step = [&]() {  // compute -> compute: the next step reads what this one wrote
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  };
  uint32_t q = 0;
  if (stamps) {
    stamp_names_.clear();
    stamp_cats_.clear();
    f.vkCmdResetQueryPool(cmd, queries_, 0, max_stamps_);
    f.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, q++);
  }
  auto stage = [&](const char* name, const char* category) {
    if (!per_stage) return;
    f.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, q++);
    stamp_names_.push_back(name);
    stamp_cats_.push_back(category);
  };
  // int8 (FISH_VK_INT8), decode and prefill: a step's input x' (x, or x∘x2, times the
  // per-token scale) is quantised once per activation format its weights
  // need (quant(), then a barrier), and their matvecs read the int8 rows.
  const uint32_t i8_mask = m.tiled ? 0xFFu : i8_mask_;  // decode: FISH_VK_SPAN_I8
  auto i8w = [&](const Weight* w) {
    if (!int8_ || !ctx_.matmul->int8_for(*w->type)) return false;
    if (i8_mask == 0xFFu) return true;
    uint32_t bit = 7;  // the head
    for (const Layer& L : layers_)
      for (uint32_t wi = 0; wi < 7; ++wi)
        if (L.w[wi] == w) bit = wi;
    return ((i8_mask >> bit) & 1u) != 0;
  };
  // B32 (Mode::fold kFold32, one token): K-quant weights read x in blocks of 32.
  const bool b32 = (m.fold & kFold32) != 0;
  auto kq = [&](const Weight* w) { return MatmulKernels::q8_block(*w->type) == 256; };
  auto xq_off = [&](const Weight* w) { return kq(w) ? a.xqk : a.xql; };
  auto xq_stride = [&](const Weight* w) {
    if (b32 && kq(w)) return MatmulKernels::b32_row_words(uint32_t(w->n_in));
    return MatmulKernels::q8_row_words(MatmulKernels::q8_block(*w->type), uint32_t(w->n_in));
  };
  // nt: tokens to quantise (0: all n; the head quantises the last token's row only).
  auto quant = [&](std::initializer_list<const Weight*> ws, uint32_t x_off, uint32_t x_stride, uint32_t inv_in,
                   uint32_t parts, uint32_t x2_off, bool xprod, uint32_t nt = 0) {
    bool done[2] = {false, false};
    for (const Weight* w : ws) {
      if (!i8w(w)) continue;
      const uint32_t bs = MatmulKernels::q8_block(*w->type);
      bool& d = done[bs == 256 ? 0 : 1];
      if (d) continue;
      d = true;
      QuantPush qp;
      qp.n = uint32_t(w->n_in), qp.n_tok = nt ? nt : n, qp.x_off = x_off, qp.x_stride = x_stride, qp.x2_off = x2_off;
      qp.inv_in = inv_in, qp.inv_parts = inv_in == kNone ? 0 : parts, qp.eps = shape_.rms_eps;
      qp.q_off = xq_off(w), qp.q_stride = xq_stride(w);
      ctx_.matmul->record_quantize(cmd, quant_set_, qp, b32 && bs == 256 ? 32 : bs, xprod, b32 && bs == 256);
    }
    if (done[0] || done[1]) {
      step();
      stage("quantise x (int8)", "quantise x");
    }
  };
  // Mode::fold (int8 decode): producers write the next step's Q8_K rows
  // themselves (matvec_span.comp / span_attention.comp QOUT) instead of a
  // quantize_x dispatch + barrier: the attention for wo (fa), the norm
  // epilogues of wo and down for gate/up and the next q/k/v (fn), the gate|up
  // pair for down (fgu). They write the one of two regions their own input is
  // not in; cur: the region the next int8 step reads (quant() writes region 0).
  // (B32: the producers own whole blocks, so the narrow attention folds too.)
  const bool fa = (m.fold & kFoldAttn) != 0 && (b32 || !narrow), fn = (m.fold & kFoldNorm) != 0,
             fgu = (m.fold & kFoldGateUp) != 0;
  // kFoldWoIn: wo quantises the attention's f32 output itself (matvec_span.comp XSH).
  const bool fwo = (m.fold & kFoldWoIn) != 0 && b32 && i8w(layers_[0].w[3]);
  // kFoldDownIn: down quantises silu(gate)·up itself (the norm epilogue's path).
  const bool fdn = (m.fold & kFoldDownIn) != 0 && b32 && !fgu && i8w(layers_[0].w[6]);
  const uint32_t xq_reg[2] = {a.xqk, a.xq2};
  int cur = 0;
  // Words per token of a fold's output rows (its consumers are K-quant weights: Q8_K or B32 rows).
  auto fold_words = [&](uint32_t n_in) {
    return b32 ? MatmulKernels::b32_row_words(n_in) : MatmulKernels::q8_row_words(256, n_in);
  };
  // One span matmul: every chunk of weight `w` of layer L. inv_in: the
  // per-token scale of x (the producer's 1/rms), or kNone; parts > 0: inv_in
  // holds the producer's Σy² partials instead (FISH_VK_SPAN_NORM=1). EPI 3 (the
  // next norm) writes y·P[norm_next..] to xn and 1/rms to inv_out (kNone: only
  // the partials). xq_in: the producer's Q8_K rows of x (fold; the scale is
  // still applied here), else quant()'s. q_out: fold's output rows (single chunk).
  // Returns the last chunk's row groups (EPI 3's partials). matmul(): any
  // weight with its chunks' descriptor sets on nt tokens; mm(): layer L's weight w on all n.
  auto matmul = [&](const Weight* wt, const std::vector<VkDescriptorSet>& sets, uint32_t nt, uint32_t x_off,
                    uint32_t x_stride, uint32_t y_off, uint32_t y_stride, SpanFusion fz, uint32_t inv_in = kNone,
                    uint32_t parts = 0, uint32_t x2_off = 0, uint32_t norm_next = 0, uint32_t inv_out = 0,
                    uint32_t xq_in = kNone, uint32_t q_out = kNone) {
    if (i8w(wt)) {
      fz.int8 = true;
      fz.xb32 = b32 && kq(wt);
      fz.qb32 = b32 && q_out != kNone;
      if (fz.xsh) {  // x (and x2) stay the f32 rows (no scale: the caller's inv_in is kNone)
        if (!fz.xprod) x2_off = 0;
      } else if (xq_in != kNone) x_off = xq_in, x_stride = xq_stride(wt), x2_off = 0;
      else x_off = xq_off(wt), x_stride = xq_stride(wt), inv_in = kNone, parts = 0, x2_off = 0;  // all in quant()'s rows
    }
    uint32_t groups = 0;
    for (size_t c = 0; c < wt->chunks.size(); ++c) {
      const WeightChunk& ch = wt->chunks[c];
      SpanMatmulPush pc;
      pc.m = {uint32_t(wt->n_in), ch.rows, nt, x_stride, x_off, y_stride, y_off + ch.row0, fz.xsh && fz.xprod ? 1u : 0u};
      pc.inv_in = inv_in;
      pc.inv_parts = inv_in == kNone ? 0 : parts;
      pc.eps = shape_.rms_eps;
      pc.x2_off = x2_off;
      pc.norm_off = norm_next;
      pc.xg_off = a.xn;
      pc.sq_off = a.sq;
      pc.cnt = ctrl::kNormCount;
      pc.inv_out = inv_out;
      if (q_out != kNone) pc.q_out = q_out, pc.q_stride = fold_words(ch.rows), pc.qcnt = a.qcnt;
      groups = ctx_.matmul->record_span(cmd, *wt->type, sets[c], pc, fz);
    }
    return groups;
  };
  auto mm = [&](const Layer& L, int w, auto... rest) { return matmul(L.w[w], L.mm_sets[w], n, rest...); };

  // Earlier submissions (uploads, the previous forward) before anything here.
  barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  // ctrl block + x: staging -> arena, then also read as the attention's indirect grid.
  k.copy(cmd, copy_in_set_, (ctrl::kWords * 4 + (m.fuse_norm ? 2 : 1) * n * E * 4) / 16);
  barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
  stage("copy x in", "copy");

  const float scale = shape_.attn_scale != 0 ? shape_.attn_scale : float(1.0 / std::sqrt(double(D)));
  // norm_parts: 1/rms of the fused norms is reduced by the consumers from the
  // producer's partials (the producer then writes no 1/rms). attn_parts: the
  // partials per token of the attention norm's producer (layer 0: 0, the
  // host's 1/rms in the ctrl block).
  const bool parts_mode = m.fuse_norm && m.norm_parts;
  const uint32_t inv_attn = parts_mode ? a.sq : ctrl::kInvAttn, inv_ffn = parts_mode ? a.sq : ctrl::kInvFfn;
  uint32_t attn_parts = 0;
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& L = layers_[li];
    const bool last = li + 1 == layers_.size();
    SpanPush p;
    p.n_tok = n;
    p.n_embd = E;
    p.eps = shape_.rms_eps;
    p.kv_cap = uint32_t(capacity_);
    p.att_off = a.att;
    p.part_off = a.part;
    p.cnt_off = a.cnt;
    p.bq_off = L.bq, p.bk_off = L.bk, p.bv_off = L.bv, p.qn_off = L.qn, p.kn_off = L.kn;
    p.scale = scale;
    p.n_rot = uint32_t(shape_.n_rot);
    p.neox = shape_.neox ? 1 : 0;
    p.n_head = uint32_t(shape_.n_head);
    p.q_stride = QKV;
    p.k_off = a.qkv + QD;
    p.v_off = a.qkv + QD + KD;

    // ---- attention block ----
    // fuse_norm: x·attn_norm is in xn (layer 0: after x's rows, from the host)
    // and 1/rms in the ctrl block (or its partials in sq), written by the
    // previous layer's down epilogue.
    uint32_t in = li == 0 ? a.x + n * E : a.xn, inv = li == 0 ? ctrl::kInvAttn : inv_attn;
    uint32_t parts = li == 0 || !parts_mode ? 0 : attn_parts;
    if (!m.fuse_norm) {
      SpanPush r = p;
      r.x_off = a.x, r.y_off = a.xn, r.norm_off = L.attn_norm;
      k.rmsnorm(cmd, L.aux_set, r);
      step();
      stage("rmsnorm", "rmsnorm");
      in = a.xn, inv = kNone;
    }
    const SpanFusion fq{0, false, false, kRoleQkv};
    const bool q_ready = fn && li > 0;  // the previous down wrote x·attn_norm's rows
    if (!q_ready) {
      quant({L.w[0], L.w[1], L.w[2]}, in, E, inv, parts, 0, false);
      cur = 0;  // xq_reg[0] is quant()'s Q8_K region
    }
    const uint32_t xq_qkv = q_ready ? xq_reg[cur] : kNone;
    mm(L, 0, in, E, a.qkv, QKV, fq, inv, parts, 0, 0, 0, xq_qkv);
    mm(L, 1, in, E, a.qkv + QD, QKV, fq, inv, parts, 0, 0, 0, xq_qkv);
    mm(L, 2, in, E, a.qkv + QD + KD, QKV, fq, inv, parts, 0, 0, 0, xq_qkv);
    step();
    stage(m.tiled ? "q/k/v tiled" : "q/k/v matvec", "matvec");
    if (!m.fuse_attn) {
      SpanPush r = p;
      r.q_off = a.qkv, r.qr_off = a.qr;
      k.rope_store(cmd, L.aux_set, r, kshape_);
      step();
      stage("q/k prep, RoPE + KV store", "RoPE + KV store");
      p.q_off = a.qr;
      p.q_stride = QD;
    } else {
      p.q_off = a.qkv;
    }
    if (fa) p.q8_out = xq_reg[cur ^ 1], p.q8_stride = fold_words(QD), p.q8_cnt = a.qcnt;
    k.attention(cmd, L.aux_set, p, attn_shape(narrow), m.fuse_attn, arena_buf_.buffer, b32);
    step();
    stage(m.fuse_attn ? "attention (+q/k prep, RoPE, KV store)" : "attention", "attention");
    uint32_t ffn_parts = 0;
    if (fa) {
      cur ^= 1;
    } else if (!fwo) {
      quant({L.w[3]}, a.att, QD, kNone, 0, 0, false);
      cur = 0;
    }
    if (m.fuse_norm) {
      SpanFusion fz_wo{3, false, false, kRoleWo};
      fz_wo.xsh = fwo;
      ffn_parts = mm(L, 3, a.att, QD, a.x, E, fz_wo, kNone, 0, 0, L.ffn_norm,
                     parts_mode ? kNone : ctrl::kInvFfn, fa ? xq_reg[cur] : kNone, fn ? xq_reg[cur ^ 1] : kNone);
      if (fn) cur ^= 1;
      step();
      stage("wo matvec (+add, FFN rmsnorm)", "matvec");
    } else if (m.fuse_epi) {
      mm(L, 3, a.att, QD, a.x, E, SpanFusion{1, false, false, kRoleWo});
      step();
      stage(m.tiled ? "wo tiled (+add)" : "wo matvec (+add)", "matvec");
    } else {
      mm(L, 3, a.att, QD, a.o, E, SpanFusion{0, false, false, kRoleWo});
      step();
      stage("wo matvec", "matvec");
      SpanPush r = p;
      r.x_off = a.x, r.y_off = a.o, r.count = n * E;
      k.add(cmd, L.aux_set, r);
      step();
      stage("add", "add");
    }

    // ---- FFN block ----
    in = a.xn, inv = inv_ffn, parts = parts_mode ? ffn_parts : 0;
    if (!m.fuse_norm) {
      SpanPush r = p;
      r.x_off = a.x, r.y_off = a.xn, r.norm_off = L.ffn_norm;
      k.rmsnorm(cmd, L.aux_set, r);
      step();
      stage("rmsnorm", "rmsnorm");
      inv = kNone;
    }
    // pair: gate and up in one dispatch writing silu(gate)·up to g; down then reads g alone.
    const bool pair = m.pair_gu && L.gu_set != VK_NULL_HANDLE;
    if (!fn) {
      quant({L.w[4], L.w[5]}, in, E, inv, parts, 0, false);
      cur = 0;
    }
    const uint32_t xq_gu = fn ? xq_reg[cur] : kNone;
    if (pair) {  // gate's one chunk, with up's bound beside it (L.gu_set)
      matmul(L.w[4], {L.gu_set}, n, in, E, a.g, F, SpanFusion{4, false, true, kRoleGateUp}, inv, parts, 0, 0, 0, xq_gu,
             fgu ? xq_reg[cur ^ 1] : kNone);
      if (fgu) cur ^= 1;
    } else {
      const SpanFusion fg{m.fuse_epi ? 2u : 0u, false, false, kRoleGateUp}, fu{0, false, false, kRoleGateUp};
      mm(L, 4, in, E, a.g, F, fg, inv, parts, 0, 0, 0, xq_gu);
      mm(L, 5, in, E, a.u, F, fu, inv, parts, 0, 0, 0, xq_gu);
    }
    step();
    stage(m.tiled      ? "gate/up tiled (+silu)"
          : pair       ? "gate|up matvec (+silu·up)"
          : m.fuse_epi ? "gate/up matvec (+silu)"
                       : "gate/up matvec",
          "matvec");
    // With the head, the last layer's down hands the head its norm as it hands
    // the next layer's q/k/v theirs (x·norm in xn, 1/rms or its partials).
    const bool norm_next = m.fuse_norm && (!last || head);
    SpanFusion fd{norm_next ? 3u : 1u, !pair, false, kRoleDown};
    fd.xsh = fdn && norm_next;
    if (!fgu && !fd.xsh && (norm_next || m.fuse_epi)) {
      quant({L.w[6]}, a.g, F, kNone, 0, a.u, !pair);
      cur = 0;
    }
    const uint32_t xq_down = fgu ? xq_reg[cur] : kNone;
    if (norm_next) {
      const bool qf = fn && !last;  // the head's input is quantised by quant() below
      attn_parts = mm(L, 6, a.g, F, a.x, E, fd, kNone, 0, a.u, last ? head_norm_ : layers_[li + 1].attn_norm,
                      parts_mode ? kNone : ctrl::kInvAttn, xq_down, qf ? xq_reg[cur ^ 1] : kNone);
      if (qf) cur ^= 1;
      step();
      stage(pair ? "down matvec (+add, next rmsnorm)" : "down matvec (+act·mul, add, next rmsnorm)", "matvec");
    } else if (m.fuse_epi) {
      mm(L, 6, a.g, F, a.x, E, fd, kNone, 0, a.u, 0, 0, xq_down);
      step();
      stage(m.tiled ? "down tiled (+act·mul, add)" : pair ? "down matvec (+add)" : "down matvec (+act·mul, add)",
            "matvec");
    } else {
      SpanPush r = p;
      r.x_off = a.g, r.y_off = a.u, r.count = n * F;
      k.act_mul(cmd, L.aux_set, r);
      step();
      stage("act·mul", "act·mul");
      quant({L.w[6]}, a.g, F, kNone, 0, 0, false);
      mm(L, 6, a.g, F, a.o, E, SpanFusion{0, false, false, kRoleDown});
      step();
      stage("down matvec", "matvec");
      r = p;
      r.x_off = a.x, r.y_off = a.o, r.count = n * E;
      k.add(cmd, L.aux_set, r);
      step();
      stage("add", "add");
    }
  }

  if (head) {
    // The head on the last token t: logits = (x_t / rms · norm) · headᵀ. Decode
    // (fuse_norm) finds x_t·norm in xn and its 1/rms (or partials) where the
    // last down epilogue put them; otherwise a one-row rmsnorm makes xn.
    const uint32_t t = n - 1;
    uint32_t in = a.xn + t * E, inv = kNone, parts = 0;
    if (m.fuse_norm) {
      inv = parts_mode ? a.sq + t * attn_parts : ctrl::kInvAttn + t;
      parts = parts_mode ? attn_parts : 0;
    } else {
      SpanPush r;
      r.n_tok = 1, r.n_embd = E, r.eps = shape_.rms_eps;
      r.x_off = a.x + t * E, r.y_off = a.xn, r.norm_off = head_norm_;
      k.rmsnorm(cmd, layers_.back().aux_set, r);
      step();
      stage("rmsnorm", "rmsnorm");
      in = a.xn;
    }
    const Weight* hw = head_;
    quant({hw}, in, E, inv, parts, 0, false, 1);
    matmul(hw, head_sets_, 1, in, E, 0, uint32_t(hw->n_out), SpanFusion{0, false, false, kRoleOther}, inv, parts);
    stage("output head matvec", "matvec");
  }
  k.copy(cmd, copy_out_set_, n * E * 4 / 16);
  barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
  if (per_stage) {
    stage("copy x out", "copy");
  } else if (stamps) {
    f.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, q++);
    stamp_names_.push_back("forward");
    stamp_cats_.push_back("forward");
  }
}

std::string Span::profile() {
  if (prof_forwards_ == 0) return "";
  char buf[512];
  std::string s;
  std::snprintf(buf, sizeof buf,
                "vulkan span (layers %d..%d): %llu forwards (%llu decode), %llu tokens, %llu submits, wall %.3f ms",
                first_layer_, first_layer_ + shape_.n_layers - 1, (unsigned long long)prof_forwards_,
                (unsigned long long)prof_decode_, (unsigned long long)prof_tokens_, (unsigned long long)prof_submits_,
                prof_wall_s_ * 1e3);
  s += buf;
  if (prof_decode_ > 0) {
    std::snprintf(buf, sizeof buf, "\nvulkan span decode: %.3f ms wall per token", prof_decode_wall_s_ * 1e3 / double(prof_decode_));
    s += buf;
    if (prof_decode_gpu_s_ > 0) {
      std::snprintf(buf, sizeof buf, ", %.3f ms on the device (GPU timestamps)", prof_decode_gpu_s_ * 1e3 / double(prof_decode_));
      s += buf;
    }
    const double us = 1e6 / double(prof_decode_);
    std::snprintf(buf, sizeof buf,
                  "\nvulkan span decode, host side per token: %.1f us preparing x and the ctrl block, %.1f us from "
                  "submit to the fence, %.1f us copying x and the logits out",
                  prof_decode_prep_s_ * us, prof_decode_wait_s_ * us, prof_decode_copy_s_ * us);
    s += buf;
  }
  if (!stages_.empty() && prof_decode_gpu_s_ > 0) {
    // Categories first (the spec's profile), then every step.
    std::vector<std::pair<double, std::string>> cats;
    for (const auto& [name, st] : stages_) {
      auto it = std::find_if(cats.begin(), cats.end(), [&](const auto& c) { return c.second == st.category; });
      if (it == cats.end()) cats.emplace_back(st.seconds, st.category);
      else it->first += st.seconds;
    }
    std::sort(cats.rbegin(), cats.rend());
    s += "\nvulkan span decode stages (FISH_GPU_PROFILE=2, share of device time):";
    for (const auto& [sec, cat] : cats) {
      std::snprintf(buf, sizeof buf, " %s %.1f%%,", cat.c_str(), 100.0 * sec / prof_decode_gpu_s_);
      s += buf;
    }
    s.pop_back();
    std::vector<const Stage*> order;
    for (const auto& [name, st] : stages_) order.push_back(&st);
    std::sort(order.begin(), order.end(), [](const Stage* x, const Stage* y) { return x->seconds > y->seconds; });
    for (const Stage* st : order) {
      std::snprintf(buf, sizeof buf, "\n  %-40s %8.4f ms per token  %5.1f%%", st->name.c_str(),
                    st->seconds * 1e3 / double(prof_decode_), 100.0 * st->seconds / prof_decode_gpu_s_);
      s += buf;
    }
  }
  stages_.clear();
  prof_forwards_ = prof_decode_ = prof_tokens_ = prof_submits_ = 0;
  prof_wall_s_ = prof_gpu_s_ = prof_decode_wall_s_ = prof_decode_gpu_s_ = 0;
  prof_decode_prep_s_ = prof_decode_wait_s_ = prof_decode_copy_s_ = 0;
  return s;
}

}  // namespace fish::vk
