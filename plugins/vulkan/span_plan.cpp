// Which steps a span forward records (span_plan.h): per layer, for n tokens,
//   prefill (n > 32): rmsnorm → q/k/v tiled → RoPE + KV store → attention →
//                     wo tiled + residual → rmsnorm → gate tiled (silu) → up
//                     tiled (·silu(gate)) → down tiled + residual
//                     (on cooperative matrices with f32 products, the
//                     rmsnorms, the attention and the up write f16 rows for
//                     the next products: SpanFusion::xh / oh)
//   decode (n <= 32): q/k/v matvecs on the previous epilogue's x·attn_norm →
//                     [RoPE + KV store, n > 1] → attention (n = 1: with the
//                     q/k preparation, RoPE and KV store) → wo matvec +
//                     residual + the FFN norm's x·ffn_norm and Σy² →
//                     gate|up matvecs → down matvec + residual + the next
//                     layer's (or the head's) x·norm and Σy²
// with a barrier after each step. Decode of 2..32 rows (several sequences, a
// short chunk) runs the matvecs with token groups (MatmulKernels::
// kMaxSpanMatvecTokens): each weight row read once per 8 rows. A norm
// epilogue leaves Σy² partials per row group; each consumer reduces them to
// 1/rms itself (no arrival counter in the producer). Layer 0's attention norm is the host's (run_batch).
// int8: a matmul step's input is quantised first (a quantise step + barrier),
// except in the B32 decode (Span::B32Decode), where the producing kernels
// write the next matvec's rows themselves.
// MoE spans normalise x by a step before each attention and FFN (as prefill
// does; the experts' kernels read f32 n) except in decode without a shared
// expert (norm epilogues, as above; in the B32 decode the attention writes
// wo's rows, wo the experts' gate|up's, the gate|up the down's and the
// summed down the next layer's q/k/v rows, Span::B32Decode), and their FFN is
//   rmsnorm → router matmul → route (softmax, top-k, pairs grouped by expert)
//   → [shared expert: gate (silu), up → down] → experts' gate|up (silu·up)
//   → experts' down (weighted) → x += Σ of the k rows (+ the gated shared expert);
// a decode (<= 4 rows) routes in the router matvec's last workgroup (no route
// step) and takes the last two as one step (the down sums into x).
#include <cmath>

#include "span.h"

namespace fish::vk {
namespace {

// The per-token scale a matmul applies to its sums: none (at = kNone), 1/rms
// per token at `at`, or (parts > 0) [n_tok][parts] Σx² partials to reduce.
struct Scale {
  uint32_t at = kNone;
  uint32_t parts = 0;
};

// One projection's operands (arena float offsets).
struct MatmulArgs {
  uint32_t x = 0, x_stride = 0;  // f32 input rows
  uint32_t y = 0, y_stride = 0;  // output rows
  Scale scale = Scale{};         // applied to the sums (x holds x·norm, not yet divided by rms)
  uint32_t x2 = 0;               // the input is x·x2 (silu(gate)·up) with SpanFusion::xprod
  uint32_t norm_next = 0;        // EPI 3: P offset of the next norm's weights
  int rows_in = -1;              // int8: x is a producer's B32 rows in region 0/1; -1: a quantise step's rows
  int rows_out = -1;             // B32 decode: the output also as B32 rows into region 0/1; -1: no
  uint32_t int8_tokens = 0;      // the tokens whose count decides int8 (coopmat prefill reads f32); 0: the forward's
  uint32_t half_out = kNone;     // SpanFusion::oh: where the f16 rows of y = y · v go
  // EPI 5 (an MoE decode's router): the routing words' offset, k, renormalise.
  uint32_t route = kNone, route_k = 0;
  bool renorm = false;
};

// A matmul input to quantise: its f32 rows, scale and second factor.
struct QuantArgs {
  uint32_t x = 0, x_stride = 0;
  Scale scale = Scale{};
  uint32_t x2 = 0;
  bool xprod = false;
  uint32_t n_tok = 0;  // 0: every token of the forward
  uint32_t int8_tokens = 0;  // as MatmulArgs'
};

}  // namespace

class Span::Planner {
 public:
  Planner(const Span& s, const Shape& shape)
      : s_(s), a_(s.arena_), sh_(shape), n_(uint32_t(shape.n_tok)), E_(uint32_t(s.shape_.n_embd)),
        F_(uint32_t(s.shape_.n_ff)), QD_(uint32_t(s.shape_.n_head * s.shape_.head_dim)),
        KD_(uint32_t(s.shape_.n_head_kv * s.shape_.head_dim)),
        tiled_(shape.n_tok > int(MatmulKernels::kMaxSpanMatvecTokens)), one_token_(shape.n_tok == 1 && !shape.multi),
        b32_(s.b32_.on && shape.n_tok == 1 && !shape.multi), xb32_(s.b32_.on && !tiled_), plain_norms_(tiled_ || (s.moe() && !moe_decode_norms(s, shape))),
        head_(shape.head_rows > 0), narrow_(shape.narrow),
        meta_(shape.multi || (shape.head_rows > 0 && !shape.head_last)) {}

  // An MoE decode (the experts' down sums into x) without a shared expert
  // takes its norms as epilogues, as a dense decode: wo's for the FFN (the
  // router and the experts' gate|up apply 1/rms), the summed down's for the
  // next layer. (A shared expert's gate reads the FFN input while the sum
  // would write the next norm over it.)
  static bool moe_decode_norms(const Span& s, const Shape& shape) {
    return shape.n_tok <= int(MoeKernels::kSumTokens) && s.shape_.n_ff_shexp == 0;
  }

  SpanPlan build() {
    copy_in();
    for (size_t li = 0; li < s_.layers_.size(); ++li) {
      attention_block(li);
      ffn_block(li);
    }
    if (head_) logits();
    copy_out();
    return std::move(plan_);
  }

 private:
  // ---- the forward's blocks ----
  void copy_in() {
    // ctrl block + x (decode: + layer 0's x·attn_norm), then also read as the attention's indirect grid.
    const uint32_t rows = tiled_ ? 1 : 2;
    add(CopyStep{s_.copy_in_set_, (ctrl::kWords * 4 + rows * n_ * E_ * 4) / 16}, {Region::Staging},
        {Region::Ctrl, Region::X}, meta_ ? Barrier::None : Barrier::ComputeDraw, meta_ ? nullptr : "copy x in", "copy");
    if (meta_)  // and the row table
      add(CopyStep{s_.copy_meta_set_, a_.meta_words / 4}, {Region::Staging}, {Region::Meta}, Barrier::ComputeDraw,
          "copy x in", "copy");
  }

  void attention_block(size_t li) {
    const Layer& L = s_.layers_[li];
    const VkDescriptorSet aux = L.aux_set;
    SpanPush p = layer_push(L);
    // Decode finds x·attn_norm in xn (layer 0: after x's rows, from the host)
    // with its 1/rms still to apply (layer 0: in the ctrl block; later: the
    // previous down's partials); prefill normalises x here.
    uint32_t in = li == 0 ? a_.x + n_ * E_ : a_.xn;
    Scale scale = li == 0 ? Scale{ctrl::kInvAttn, 0} : Scale{a_.sq, norm_groups_};
    const bool half_qkv = half_x(L.w[kAttnQ]) && half_x(L.w[kAttnK]) && half_x(L.w[kAttnV]);
    if (plain_norms_) {
      rmsnorm(L, p, L.attn_norm, half_qkv);
      in = a_.xn, scale = {};
    }
    // The previous down wrote x·attn_norm's B32 rows (dense, or an MoE layer's summed down with sum_rows).
    const bool rows_ready = b32_ && li > 0 && next_rows_;
    if (!rows_ready) quantize({L.w[kAttnQ], L.w[kAttnK], L.w[kAttnV]}, QuantArgs{.x = in, .x_stride = E_, .scale = scale});
    MatmulArgs qkv{.x = in, .x_stride = E_, .y = a_.qkv, .y_stride = QD_ + 2 * KD_, .scale = scale};
    if (rows_ready) qkv.rows_in = rows_;
    SpanFusion plain{0, false, false, kRoleQkv};
    plain.xh = half_qkv;
    matmul(L, kAttnQ, qkv, plain, Barrier::None);
    qkv.y = a_.qkv + QD_;
    matmul(L, kAttnK, qkv, plain, Barrier::None);
    qkv.y = a_.qkv + QD_ + KD_;
    matmul(L, kAttnV, qkv, plain, Barrier::Compute, tiled_ ? "q/k/v tiled" : "q/k/v matvec", "matvec");

    p.q_off = a_.qkv;
    std::vector<Region> rows_in = {Region::Ctrl};  // what says where each row is
    if (sh_.multi) p.meta_off = a_.meta, rows_in.push_back(Region::Meta);
    if (!one_token_) {  // one token: the attention prepares q and k itself
      SpanPush r = p;
      r.qr_off = a_.qr;
      std::vector<Region> reads = rows_in;
      reads.push_back(Region::Qkv);
      add(RopeStoreStep{aux, r, s_.kshape_, sh_.multi}, reads, {Region::QRoped, Region::Kv}, Barrier::Compute,
          "q/k prep, RoPE + KV store", "RoPE + KV store");
      p.q_off = a_.qr;
      p.q_stride = QD_;
    }
    const bool attention_rows = b32_ && s_.b32_.attention;
    std::vector<Region> writes = {Region::Attn, Region::Kv};
    if (attention_rows) {
      p.q8_out = rows_offset(other()), p.q8_stride = MatmulKernels::b32_row_words(QD_);
      writes.push_back(rows_region(other()));
    }
    std::vector<Region> reads = rows_in;
    reads.push_back(one_token_ ? Region::Qkv : Region::QRoped);
    reads.push_back(Region::Kv);
    // A prompt chunk of one sequence: on query tiles where the device takes them.
    const bool tiles = tiled_ && !sh_.multi && s_.kshape_.tile_bc != 0;
    const bool half_att = tiles && half_x(L.w[kAttnOut]);
    add(AttentionStep{aux, p, s_.attn_shape(narrow_), one_token_, sh_.multi, tiles, half_att}, reads, writes, Barrier::Compute,
        one_token_ ? "attention (+q/k prep, RoPE, KV store)" : tiles ? "attention (query tiles)" : "attention",
        "attention");
    if (attention_rows) rows_ = other();
    else quantize({L.w[kAttnOut]}, QuantArgs{.x = a_.att, .x_stride = QD_});

    // wo + the residual (decode: + the FFN norm's x·ffn_norm and Σy² partials).
    MatmulArgs wo{.x = a_.att, .x_stride = QD_, .y = a_.x, .y_stride = E_};
    if (!plain_norms_) wo.norm_next = L.ffn_norm;
    if (attention_rows) wo.rows_in = rows_;
    if (b32_ && (!s_.moe() || s_.b32_.experts)) wo.rows_out = other();  // gate|up's rows (the router reads f32 n)
    SpanFusion wo_fz{plain_norms_ ? 1u : 3u, false, false, kRoleWo};
    wo_fz.xh = half_att;
    if (router_folded()) {  // an MoE decode's wo: the router's logits and the routing too
      wo_fz.router = true;
      wo.route = a_.route, wo.route_k = uint32_t(s_.shape_.n_expert_used), wo.renorm = s_.shape_.gating_norm;
      norm_groups_ = matmul(L.w[kAttnOut], {L.wo_router_set}, n_, wo, wo_fz, Barrier::Compute,
                            "wo matvec (+add, FFN rmsnorm, router + routing)", "matvec");
    } else {
      norm_groups_ = matmul(L, kAttnOut, wo, wo_fz, Barrier::Compute,
                            tiled_ ? "wo tiled (+add)" : plain_norms_ ? "wo matvec (+add)" : "wo matvec (+add, FFN rmsnorm)",
                            "matvec");
    }
    if (wo.rows_out >= 0) rows_ = other();
  }

  void ffn_block(size_t li) {
    next_rows_ = false;
    if (s_.moe()) return moe_block(li);
    const Layer& L = s_.layers_[li];
    const bool last = li + 1 == s_.layers_.size();
    uint32_t in = a_.xn;
    Scale scale{a_.sq, norm_groups_};
    // A prompt chunk on the coopmat kernel: f16 rows from the rmsnorm (gate,
    // up) and from the up (down).
    const bool half_gu = half_x(L.w[kFfnGate]) && half_x(L.w[kFfnUp]);
    const bool half_down = half_gu && half_x(L.w[kFfnDown]) && even_chunks(L.w[kFfnUp]);
    if (tiled_) {
      rmsnorm(L, layer_push(L), L.ffn_norm, half_gu);
      scale = {};
    }
    // The pair: gate and up in one dispatch writing silu(gate)·up (and its B32 rows for down).
    const bool pair = b32_ && s_.b32_.pair;
    if (!b32_) quantize({L.w[kFfnGate], L.w[kFfnUp]}, QuantArgs{.x = in, .x_stride = E_, .scale = scale});
    MatmulArgs gu{.x = in, .x_stride = E_, .y = a_.g, .y_stride = F_, .scale = scale};
    if (b32_) gu.rows_in = rows_;
    if (pair) {
      gu.rows_out = other();
      matmul(L.w[kFfnGate], {L.gu_set}, n_, gu, SpanFusion{4, false, true, kRoleGateUp}, Barrier::Compute,
             "gate|up matvec (+silu·up)", "matvec");
      rows_ = other();
    } else if (tiled_) {
      // A prompt chunk: the gate's silu into g, then the up multiplied onto it
      // (g = silu(gate)·up), so the down reads one vector where x·x2 read two.
      SpanFusion gate_fz{2, false, false, kRoleGateUp}, up_fz{4, false, false, kRoleGateUp};
      gate_fz.xh = up_fz.xh = half_gu;
      up_fz.oh = half_down;
      matmul(L, kFfnGate, gu, gate_fz, Barrier::Compute, "gate tiled (+silu)", "matvec");
      if (half_down) gu.half_out = a_.u;
      matmul(L, kFfnUp, gu, up_fz, Barrier::Compute, "up tiled (·silu(gate))", "matvec");
    } else {
      matmul(L, kFfnGate, gu, SpanFusion{2, false, false, kRoleGateUp}, Barrier::None);
      gu.y = a_.u;
      matmul(L, kFfnUp, gu, SpanFusion{0, false, false, kRoleGateUp}, Barrier::Compute, "gate/up matvec (+silu)",
             "matvec");
    }

    // down + the residual (decode: + the next layer's or the head's x·norm and Σy² partials).
    const bool norm_next = !plain_norms_ && (!last || head_);
    const bool xprod = !pair && !tiled_;  // the down's input is g ∘ u (else g holds it)
    if (!pair) quantize({L.w[kFfnDown]}, QuantArgs{.x = a_.g, .x_stride = F_, .x2 = a_.u, .xprod = xprod});
    MatmulArgs down{.x = a_.g, .x_stride = F_, .y = a_.x, .y_stride = E_, .x2 = a_.u};
    if (half_down) down.x = a_.u;
    if (pair) down.rows_in = rows_;
    if (norm_next) down.norm_next = last ? s_.head_norm_ : s_.layers_[li + 1].attn_norm;
    if (b32_ && norm_next && !last) down.rows_out = other();  // the head's input is quantised by a step
    const char* stage = norm_next ? (pair ? "down matvec (+add, next rmsnorm)" : "down matvec (+act·mul, add, next rmsnorm)")
                        : tiled_  ? "down tiled (+add)"
                        : pair    ? "down matvec (+add)"
                                  : "down matvec (+act·mul, add)";
    SpanFusion down_fz{norm_next ? 3u : 1u, xprod, false, kRoleDown};
    down_fz.xh = half_down;
    const uint32_t groups = matmul(L, kFfnDown, down, down_fz, Barrier::Compute, stage, "matvec");
    next_rows_ = down.rows_out >= 0;
    if (next_rows_) rows_ = other();
    if (norm_next) norm_groups_ = groups;
  }

  // The head on the last token t: logits = (x_t / rms · norm) · headᵀ. Decode
  // finds x_t·norm in xn and its Σy² partials where the last down put them;
  // prefill normalises row t here. Other rows (rows_logits): the listed rows.
  void logits() {
    if (!sh_.head_last) return rows_logits();
    const uint32_t t = n_ - 1;
    uint32_t in = a_.xn + t * E_;
    Scale scale{a_.sq + t * norm_groups_, norm_groups_};
    if (plain_norms_) {
      SpanPush r;
      r.n_tok = 1, r.n_embd = E_, r.eps = s_.shape_.norm_eps;
      r.x_off = a_.x + t * E_, r.y_off = a_.xn, r.norm_off = s_.head_norm_;
      add(RmsNormStep{s_.layers_.back().aux_set, r}, {Region::X}, {Region::XNorm}, Barrier::Compute, "rmsnorm", "rmsnorm");
      in = a_.xn, scale = {};
    }
    const Weight* head = s_.head_;
    quantize({head}, QuantArgs{.x = in, .x_stride = E_, .scale = scale, .n_tok = 1});
    matmul(head, s_.head_sets_, 1, MatmulArgs{.x = in, .x_stride = E_, .y = 0, .y_stride = uint32_t(head->n_out), .scale = scale},
           SpanFusion{0, false, false, kRoleOther}, Barrier::None, "output head matvec", "matvec");
  }

  // The head on the k rows the row table lists (in row order): rmsnorm(x_row) ·
  // norm into xn's first k rows, then the head's matmul on them (matvec for k
  // <= 32, else tiled), logits row i of the i-th listed row.
  void rows_logits() {
    const uint32_t k = uint32_t(sh_.head_rows);
    SpanPush r;
    r.n_tok = k, r.n_embd = E_, r.eps = s_.shape_.norm_eps;
    r.x_off = a_.x, r.y_off = a_.xn, r.norm_off = s_.head_norm_, r.meta_off = a_.meta + 2 * a_.tokens;
    add(RmsNormStep{s_.layers_.back().aux_set, r, true}, {Region::X, Region::Meta}, {Region::XNorm}, Barrier::Compute,
        "rmsnorm (head rows)", "rmsnorm");
    const Weight* head = s_.head_;
    quantize({head}, QuantArgs{.x = a_.xn, .x_stride = E_, .n_tok = k, .int8_tokens = k});
    matmul(head, s_.head_sets_, k,
           MatmulArgs{.x = a_.xn, .x_stride = E_, .y = 0, .y_stride = uint32_t(head->n_out), .int8_tokens = k},
           SpanFusion{0, false, false, kRoleOther}, Barrier::None, k > MatmulKernels::kMaxSpanMatvecTokens ? "output head tiled" : "output head matvec",
           "matvec");
  }

  // The MoE FFN (see the top of this file). n: rmsnorm(x)·ffn_norm in xn.
  void moe_block(size_t li) {
    const Layer& L = s_.layers_[li];
    const SpanIn& in = s_.shape_;
    const uint32_t NE = uint32_t(in.n_expert), K = uint32_t(in.n_expert_used), FE = uint32_t(in.n_ff_expert);
    const uint32_t FS = uint32_t(in.n_ff_shexp);
    const bool last = li + 1 == s_.layers_.size();
    Scale scale{a_.sq, norm_groups_};  // wo's epilogue left n·ffn_norm and its Σy² partials
    if (plain_norms_) rmsnorm(L, layer_push(L), L.ffn_norm), scale = {};
    // A decode routes in its router matvec's last workgroup (EPI 5: the pairs'
    // words for the gate|up and the down) and sums its down into x; else
    // routing and the sum are steps of their own.
    const bool decode = n_ <= MoeKernels::kSumTokens;
    // The router's logits [n][n_expert] (a one-row decode on B32 rows: wo computed them and routed).
    if (!router_folded()) {
      quantize({L.w[kFfnRouter]}, QuantArgs{.x = a_.xn, .x_stride = E_, .scale = scale});
      MatmulArgs router{.x = a_.xn, .x_stride = E_, .y = a_.rl, .y_stride = NE, .scale = scale};
      router.route = a_.route, router.route_k = K, router.renorm = in.gating_norm;
      matmul(L, kFfnRouter, router, SpanFusion{decode ? 5u : 0u, false, false, kRoleOther}, Barrier::Compute,
             decode ? "router matvec (+routing)" : "router matmul", "matvec");
    }
    MoePush mp;
    mp.n_expert = NE, mp.k = K, mp.route_off = a_.route, mp.flags = in.gating_norm ? 1u : 0u;
    if (!decode) {
      MoePush r = mp;
      r.s.m = {NE, 0, n_, NE, a_.rl, 0, 0};
      add(MoeRouteStep{L.moe_aux, r}, {Region::RouterLogits}, {Region::Route}, Barrier::None, "MoE routing", "MoE routing");
    }
    // The shared expert (a dense FFN into shx), beside the routing.
    if (FS > 0) {
      quantize({L.w[kGateShexp], L.w[kUpShexp]}, QuantArgs{.x = a_.xn, .x_stride = E_});
      MatmulArgs gu{.x = a_.xn, .x_stride = E_, .y = a_.g, .y_stride = FS};
      matmul(L, kGateShexp, gu, SpanFusion{2, false, false, kRoleGateUp}, Barrier::None);
      gu.y = a_.u;
      matmul(L, kUpShexp, gu, SpanFusion{0, false, false, kRoleGateUp}, Barrier::Compute, "shared expert gate/up (+silu)",
             "matvec");
      quantize({L.w[kDownShexp]}, QuantArgs{.x = a_.g, .x_stride = FS, .x2 = a_.u, .xprod = true});
      matmul(L, kDownShexp, MatmulArgs{.x = a_.g, .x_stride = FS, .y = a_.shx, .y_stride = E_, .x2 = a_.u},
             SpanFusion{0, true, false, kRoleDown}, Barrier::None, "shared expert down (+act·mul)", "matvec");
    }
    plan_.steps.back().barrier = Barrier::Compute;
    // The chosen experts: gate|up → silu·up rows [n·k][FE], then down → weighted rows [n·k][E].
    MoePush gu = mp;
    gu.s.m = {E_, FE, n_, E_, a_.xn, FE, a_.hx};
    gu.s.inv_in = scale.at, gu.s.inv_parts = scale.parts, gu.s.eps = in.norm_eps;
    std::vector<Region> gu_reads = {Region::XNorm, Region::Route};
    std::vector<Region> gu_writes = {Region::ExpertHidden};
    if (scale.at != kNone) gu_reads.push_back(region_of(scale.at));
    if (decode) gu.flags |= MoePush::kPairs;  // by pair: the router's tail wrote their words
    // A one-row decode on B32 rows: the gate|up reads wo's rows (1/rms still applied here).
    const bool gu_int8 = decode && b32_ && s_.b32_.experts;
    if (gu_int8) {
      gu.s.m.x_off = rows_offset(rows_), gu.s.m.x_stride = MatmulKernels::b32_row_words(E_);
      gu_reads[0] = rows_region(rows_);
    }
    // ... and writes h's B32 rows into dx (a decode's down sums into x: dx is free) for the down.
    const bool down_int8 = gu_int8 && s_.b32_.down;
    if (down_int8) {
      gu.s.q_out = a_.dx, gu.s.q_stride = MatmulKernels::b32_row_words(FE);
      gu_writes.push_back(Region::ExpertOut);
    }
    MoePush dn = mp;
    dn.s.m = {FE, E_, n_, FE, a_.hx, E_, a_.dx};
    if (MoeKernels::use_tiled(n_, NE, K)) {
      // A prompt chunk: tiled products per expert over its pairs (gate → silu
      // into hx, up multiplied onto it, down × the routing weight).
      add(MoeTiledStep{L.w[kGateExps], L.moe_gu, gu, MoeKernels::kSilu, true}, {Region::XNorm, Region::Route},
          {Region::ExpertHidden}, Barrier::Compute, "experts gate tiled (+silu)", "MoE experts");
      add(MoeTiledStep{L.w[kUpExps], L.moe_up, gu, MoeKernels::kMulY, true},
          {Region::XNorm, Region::Route, Region::ExpertHidden}, {Region::ExpertHidden}, Barrier::Compute,
          "experts up tiled (·silu(gate))", "MoE experts");
      add(MoeTiledStep{L.w[kDownExps], L.moe_down, dn, MoeKernels::kRouteWeight, false},
          {Region::ExpertHidden, Region::Route}, {Region::ExpertOut}, Barrier::Compute,
          "experts down tiled (+routing weight)", "MoE experts");
    } else {
      add(MoeMatvecStep{L.w[kGateExps], L.moe_gu, gu, true, false, false, gu_int8}, gu_reads, gu_writes,
          Barrier::Compute,
          down_int8 ? "experts gate|up on B32 rows (+silu·up, B32 rows)"
          : gu_int8 ? "experts gate|up on B32 rows (+silu·up)"
                    : "experts gate|up (+silu·up)",
          "MoE experts");
      if (decode) {
        // Decode: the down sums the k weighted rows (+ the gated shared expert) into x itself.
        dn.s.m.y_off = a_.x;
        dn.s.x2_off = a_.shx, dn.s.xg_off = a_.xn, dn.s.norm_off = FS > 0 ? L.shexp_gate : kNone;
        std::vector<Region> reads = {Region::ExpertHidden, Region::Route, Region::X}, writes = {Region::X};
        if (down_int8) dn.s.m.x_off = a_.dx, dn.s.m.x_stride = MatmulKernels::b32_row_words(FE), reads[0] = Region::ExpertOut;
        if (FS > 0) reads.push_back(Region::SharedOut), reads.push_back(Region::XNorm);
        const bool next = !plain_norms_ && (!last || head_);
        if (next) {  // the next layer's (or the head's) x·norm and Σx² partials
          dn.s.norm_off = last ? s_.head_norm_ : s_.layers_[li + 1].attn_norm;
          dn.s.xg_off = a_.xn, dn.s.sq_off = a_.sq;
          writes.push_back(Region::XNorm), writes.push_back(Region::NormSums);
          norm_groups_ = MoeKernels::row_groups(E_);
        }
        // ... and, on B32 rows, the next layer's q/k/v rows (the head's input is quantised by a step).
        next_rows_ = next && !last && b32_ && s_.b32_.sum_rows;
        if (next_rows_) {
          dn.s.q_out = rows_offset(other()), dn.s.q_stride = MatmulKernels::b32_row_words(E_), dn.cnt_off = a_.rcnt + 1;
          writes.push_back(rows_region(other()));
        }
        add(MoeMatvecStep{L.w[kDownExps], L.moe_down, dn, false, true, next, down_int8}, reads, writes,
            Barrier::Compute,
            next_rows_ ? (down_int8 ? "experts down on B32 rows (+routing weight, sum into x, next rmsnorm, B32 rows)"
                                    : "experts down (+routing weight, sum into x, next rmsnorm, B32 rows)")
            : next     ? (down_int8 ? "experts down on B32 rows (+routing weight, sum into x, next rmsnorm)"
                                    : "experts down (+routing weight, sum into x, next rmsnorm)")
                       : (down_int8 ? "experts down on B32 rows (+routing weight, sum into x)"
                                    : "experts down (+routing weight, sum into x)"),
            "MoE experts");
        if (next_rows_) rows_ = other();
        return;
      }
      add(MoeMatvecStep{L.w[kDownExps], L.moe_down, dn, false}, {Region::ExpertHidden, Region::Route},
          {Region::ExpertOut}, Barrier::Compute, "experts down (+routing weight)", "MoE experts");
    }
    MoePush cb = mp;
    cb.s.m = {E_, 0, n_, E_, a_.dx, E_, a_.x};
    cb.s.x2_off = a_.shx, cb.s.xg_off = a_.xn, cb.s.norm_off = FS > 0 ? L.shexp_gate : kNone;
    std::vector<Region> reads = {Region::ExpertOut, Region::X};
    if (FS > 0) reads.push_back(Region::SharedOut), reads.push_back(Region::XNorm);
    add(MoeCombineStep{L.moe_aux, cb}, reads, {Region::X}, Barrier::Compute, "MoE sum (+shared expert)", "MoE sum");
  }

  void copy_out() {
    add(CopyStep{s_.copy_out_set_, n_ * E_ * 4 / 16}, {Region::X}, {Region::Readback}, Barrier::Host, "copy x out", "copy");
  }

  // ---- steps ----
  SpanPush layer_push(const Layer& L) const {
    const SpanIn& sh = s_.shape_;
    SpanPush p;
    p.n_tok = n_, p.n_embd = E_, p.eps = sh.norm_eps, p.kv_cap = s_.pool_pages_ * uint32_t(kKvPage);
    p.att_off = a_.att, p.part_off = a_.part, p.cnt_off = a_.cnt;
    p.bq_off = L.bq, p.bk_off = L.bk, p.bv_off = L.bv, p.qn_off = L.qn, p.kn_off = L.kn;
    p.scale = sh.attn_scale != 0 ? sh.attn_scale : float(1.0 / std::sqrt(double(sh.head_dim)));
    p.n_rot = uint32_t(sh.n_rot), p.neox = sh.neox ? 1 : 0, p.n_head = uint32_t(sh.n_head);
    p.q_stride = QD_ + 2 * KD_, p.k_off = a_.qkv + QD_, p.v_off = a_.qkv + QD_ + KD_;
    return p;
  }

  void rmsnorm(const Layer& L, SpanPush p, uint32_t norm, bool half = false) {
    p.x_off = a_.x, p.y_off = a_.xn, p.norm_off = norm;
    add(RmsNormStep{L.aux_set, p, false, half}, {Region::X}, {Region::XNorm}, Barrier::Compute, "rmsnorm", "rmsnorm");
  }

  // Whether w's product reads f16 rows (SpanFusion::xh): a prompt chunk on
  // the coopmat kernel with f32 products; the producer writes its rows of
  // n_in halves in words of two.
  bool half_x(const Weight* w) const {
    return tiled_ && s_.ctx_.matmul->coopmat() && !int8(w) && w->n_in % 2 == 0;
  }
  // OH writes rows in pairs: every chunk but the last starts and ends on an even row.
  static bool even_chunks(const Weight* w) {
    for (size_t c = 0; c + 1 < w->chunks.size(); ++c)
      if (w->chunks[c].rows % 2 != 0) return false;
    return true;
  }

  // Whether w's product runs on int8 x, decided on nt tokens (0: the forward's).
  bool int8(const Weight* w, uint32_t nt = 0) const {
    return s_.int8_ && s_.ctx_.matmul->span_int8_for(*w->type, nt ? nt : n_);
  }
  static bool k_quant(const Weight* w) { return MatmulKernels::q8_block(*w->type) == 256; }
  // Where w's int8 input rows are: xqk holds the B32 decode's matvecs' rows
  // (every int8 type: K-quants, Q4_0, Q8_0, xb32_) and else the CPU's Q8_K
  // rows (K-quants); xql the CPU's Q8_0 rows (blocks of 32).
  bool in_xqk(const Weight* w) const { return xb32_ || k_quant(w); }
  // Words per token of w's int8 input rows.
  uint32_t row_words(const Weight* w) const {
    if (xb32_) return MatmulKernels::b32_row_words(uint32_t(w->n_in));
    return MatmulKernels::q8_row_words(MatmulKernels::q8_block(*w->type), uint32_t(w->n_in));
  }
  // A one-row MoE decode on B32 rows whose wo folds the router in (Span::B32Decode::router).
  bool router_folded() const { return b32_ && s_.b32_.router; }
  int other() const { return rows_ ^ 1; }
  uint32_t rows_offset(int r) const { return r == 0 ? a_.xqk : a_.xq2; }
  static Region rows_region(int r) { return r == 0 ? Region::Rows : Region::RowsOther; }

  // The quantise steps of a matmul step's input: one per activation format its int8 consumers take.
  void quantize(std::initializer_list<const Weight*> consumers, const QuantArgs& q) {
    bool done[2] = {false, false};  // rows in xqk (Q8_K or B32) / in xql (Q8_0)
    for (const Weight* w : consumers) {
      if (!int8(w, q.int8_tokens) || done[in_xqk(w) ? 0 : 1]) continue;
      done[in_xqk(w) ? 0 : 1] = true;
      QuantPush qp;
      qp.n = uint32_t(w->n_in), qp.n_tok = q.n_tok ? q.n_tok : n_, qp.x_off = q.x, qp.x_stride = q.x_stride;
      qp.x2_off = q.x2, qp.inv_in = q.scale.at, qp.inv_parts = q.scale.at == kNone ? 0 : q.scale.parts;
      qp.eps = s_.shape_.norm_eps;
      qp.q_off = in_xqk(w) ? a_.xqk : a_.xql, qp.q_stride = row_words(w);
      const bool b32 = xb32_;
      std::vector<Region> reads = {region_of(q.x)};
      if (q.xprod) reads.push_back(region_of(q.x2));
      if (q.scale.at != kNone) reads.push_back(region_of(q.scale.at));
      add(QuantizeStep{qp, b32 ? 32u : MatmulKernels::q8_block(*w->type), q.xprod, b32}, reads, {Region::Rows},
          Barrier::None);
    }
    if (!done[0] && !done[1]) return;
    SpanStep& last = plan_.steps.back();
    last.barrier = Barrier::Compute, last.stage = "quantise x (int8)", last.category = "quantise x";
    rows_ = 0;
  }

  uint32_t matmul(const Layer& L, int k, const MatmulArgs& m, SpanFusion fz, Barrier b, const char* stage = nullptr,
                  const char* category = nullptr) {
    return matmul(L.w[k], L.mm_sets[k], n_, m, fz, b, stage, category);
  }
  // Every chunk of w on nt tokens; returns the row groups of its (last) chunk.
  uint32_t matmul(const Weight* w, const std::vector<VkDescriptorSet>& sets, uint32_t nt, MatmulArgs m, SpanFusion fz,
                  Barrier b, const char* stage = nullptr, const char* category = nullptr) {
    std::vector<Region> reads, writes = {region_of(m.y)};
    if (int8(w, m.int8_tokens)) {
      fz.int8 = true;
      fz.xb32 = xb32_;
      fz.qb32 = m.rows_out >= 0;
      if (m.rows_in >= 0) {
        m.x = rows_offset(m.rows_in);  // the scale is still applied here
        reads.push_back(rows_region(m.rows_in));
      } else {
        m.x = in_xqk(w) ? a_.xqk : a_.xql, m.scale = {};  // the quantise step applied it
        reads.push_back(Region::Rows);
      }
      m.x_stride = row_words(w), m.x2 = 0;
    } else {
      reads.push_back(region_of(m.x));
      if (fz.xprod) reads.push_back(region_of(m.x2));
    }
    if (m.scale.at != kNone) reads.push_back(region_of(m.scale.at));
    if (fz.epi == 1 || fz.epi == 3) reads.push_back(region_of(m.y));  // the residual
    if (fz.epi == 4 && !fz.pair) reads.push_back(region_of(m.y));    // the tiled up: silu(gate)
    if (fz.epi == 3) writes.push_back(Region::XNorm), writes.push_back(Region::NormSums);
    if (m.rows_out >= 0) writes.push_back(rows_region(m.rows_out));
    if (fz.oh) writes.push_back(region_of(m.half_out));
    if (fz.epi == 5) writes.push_back(Region::Route);
    if (fz.router) writes.push_back(Region::RouterLogits), writes.push_back(Region::Route);
    SpanMatmulPush pc;
    pc.m = {uint32_t(w->n_in), 0, nt, m.x_stride, m.x, m.y_stride, m.y};  // rows and y offset: per chunk
    pc.inv_in = m.scale.at, pc.inv_parts = m.scale.at == kNone ? 0 : m.scale.parts, pc.eps = s_.shape_.norm_eps;
    pc.x2_off = m.x2, pc.norm_off = m.norm_next, pc.xg_off = a_.xn, pc.sq_off = a_.sq;
    if (fz.oh) pc.xg_off = 2 * m.half_out - m.y;  // half index xg_off + y's float index: 2 · half_out + (y - m.y)
    if (m.rows_out >= 0) pc.q_out = rows_offset(m.rows_out), pc.q_stride = MatmulKernels::b32_row_words(uint32_t(w->n_out));
    if (fz.epi == 5) {  // matvec_span.comp's EPI 5 fields
      if (w->chunks.size() != 1) throw Failure(FailKind::Internal, "span: the router's routing tail needs one weight chunk");
      pc.norm_off = m.route, pc.xg_off = m.route_k | (m.renorm ? 0x10000u : 0u), pc.sq_off = a_.rcnt;
    }
    if (fz.router) {  // matvec_span.comp's ROUTER fields: logits, then the row groups' partials, in rl
      if (w->chunks.size() != 1) throw Failure(FailKind::Internal, "span: the router fold needs one wo chunk");
      const uint32_t NE = uint32_t(s_.shape_.n_expert);
      pc.rt_logits = a_.rl, pc.rt_part = a_.rl + NE, pc.rt_route = m.route, pc.rt_cnt = a_.rcnt;
      pc.rt_n_expert = NE, pc.rt_k = m.route_k | (m.renorm ? 0x10000u : 0u);
    }
    add(MatmulStep{w, sets, pc, fz}, reads, writes, b, stage, category);
    if (w == s_.head_) plan_.steps.back().writes = {Region::Logits};
    return s_.ctx_.matmul->span_row_groups(*w->type, uint32_t(w->n_in), w->chunks.back().rows, nt, fz);
  }

  void add(SpanKernel k, std::vector<Region> reads, std::vector<Region> writes, Barrier b, const char* stage = nullptr,
           const char* category = nullptr) {
    plan_.steps.push_back(SpanStep{std::move(k), std::move(reads), std::move(writes), b, stage, category});
  }

  // The arena region holding float offset off.
  Region region_of(uint32_t off) const {
    if (off < ctrl::kWords) return Region::Ctrl;
    if (off >= a_.meta) return Region::Meta;
    if (off < a_.xn) return Region::X;
    if (off < a_.qkv) return Region::XNorm;
    if (off < a_.qr) return Region::Qkv;
    if (off < a_.att) return Region::QRoped;
    if (off < a_.g) return Region::Attn;
    if (off < a_.u) return Region::Gate;
    if (off < a_.part) return Region::Up;
    if (off < a_.sq) return Region::AttnParts;
    if (off < a_.xqk) return Region::NormSums;
    if (off < a_.xq2) return Region::Rows;
    if (off < a_.rl) return Region::RowsOther;
    if (off < a_.route) return Region::RouterLogits;
    if (off < a_.hx) return Region::Route;
    if (off < a_.dx) return Region::ExpertHidden;
    if (off < a_.shx) return Region::ExpertOut;
    return Region::SharedOut;
  }

  const Span& s_;
  const ArenaLayout& a_;
  const Shape sh_;
  const uint32_t n_, E_, F_, QD_, KD_;
  const bool tiled_;      // n > 32: tiled matmuls, separate rmsnorm and RoPE / KV-store kernels
  const bool one_token_;  // the attention prepares q/k/v itself
  const bool b32_;        // this forward's int8 matvecs read B32 rows their producers wrote
  // The K-quant int8 inputs of a matvec forward (1..32 rows) are B32 rows, from
  // producers (b32_) or quantise steps: the rows of several sequences, or a
  // verify's, quantise x as the one-row decode does, so that they differ from
  // it only in the order of float sums (not in int8 rounding).
  const bool xb32_;
  const bool plain_norms_;  // each norm a step of its own (prefill, MoE spans), no norm epilogues
  const bool head_, narrow_;
  const bool meta_;            // the row table comes in with x (rows of several sequences, or listed head rows)
  int rows_ = 0;               // which int8 rows region (0 / 1) holds the next consumer's input
  uint32_t norm_groups_ = 0;   // Σy² partials per token of the last norm epilogue
  bool next_rows_ = false;     // the last FFN block wrote the next layer's q/k/v B32 rows (rows_)
  SpanPlan plan_;
};

SpanPlan Span::plan(const Shape& shape) const {
  if (shape.n_tok < 1 || shape.n_tok > int(arena_.tokens) || shape.head_rows < 0 || shape.head_rows > shape.n_tok ||
      (shape.head_rows > 0 && !head_) || (shape.head_last && shape.head_rows != 1) ||
      (shape.multi && shape.n_tok < 2))
    throw Failure(FailKind::InvalidArgument, "span plan: a forward shape this span cannot take");
  return Planner(*this, shape).build();
}

SpanPlan Span::plan(int n_tok, bool head) const {
  Shape sh;
  sh.n_tok = n_tok;
  sh.head_rows = head ? 1 : 0;
  sh.head_last = head;
  sh.narrow = narrow_attention(n_tok, kv_len_[0] + n_tok);
  return plan(sh);
}

}  // namespace fish::vk
