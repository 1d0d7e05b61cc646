// Conformance suite: one-sequence spans against the same plugin's per-matmul
// path (conformance_synth.h), on every shape of span_variants(): prefill and
// decode with x out, gaps and capacity refused with x untouched, truncation,
// span_kv_reserve, redone positions, a forward without x out, bad batches, the
// head (logits of chosen rows, copied and through the view), memory freed.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/conformance_synth.h"
#include "backend/host_services.h"

namespace fish::backend::conf {

namespace {

constexpr int kCtx = 96;  // positions the span reserves at creation

// The head checks: span_set_head, then logits of chosen rows copied and viewed.
// A plugin without a head skips them; one that gives only some rows' logits
// (FISH_E_UNSUPPORTED) skips the checks of the others.
void run_head_checks(Runner& run, const std::string& tag, SpanRig& g, bool& ok, const std::string& no_span,
                     std::mt19937_64& rng) {
  const int E = g.s.v.n_embd;
  BackendWeight* hw = nullptr;
  bool attached = false;
  std::string no_head = no_span;  // why the head checks are skipped
  auto head_check = [&](const std::string& what, auto&& body) {
    run.check(
        tag + ": head: " + what,
        [&]() -> std::string {
          if (!no_head.empty()) skip(no_head);
          if (!ok) fail("an earlier step of this span failed");
          return body();
        },
        true);
  };
  // Logits of rows `want` (and x out) at the sequence's end, against the reference head on the reference stream.
  auto logits_rows = [&](int n_tok, std::vector<uint8_t> want, bool view, bool x_out, const std::string& what) {
    Rows r;
    r.add(0, g.ref->len(0), n_tok);
    r.want = want;
    std::vector<float> x = random_vector(size_t(n_tok) * E, 1.0f, rng), xr = x, before = x;
    std::vector<float> lg(size_t(r.n_wanted()) * kVocab, NAN);
    SpanBatch b;
    b.n_tok = n_tok;
    b.x = x.data();
    b.pos = r.pos.data();
    b.logits_rows = r.want.data();
    b.x_out = x_out;
    b.logits_view = view;
    b.logits = view ? nullptr : lg.data();
    if (!g.be->span_forward_once(g.span, b)) {
      if (g.be->last_status() != FISH_E_UNSUPPORTED) fail(what + ": span_forward: " + g.be->last_error());
      // Not implemented: the same rows without logits keep the two sides in step.
      const std::string why = g.be->last_error();
      SpanBatch plain;
      plain.n_tok = n_tok;
      plain.x = x.data();
      plain.pos = r.pos.data();
      plain.x_out = true;
      expect(g.be->span_forward_once(g.span, plain), what + ": without logits: " + g.be->last_error());
      g.ref->forward(xr.data(), n_tok, nullptr, r.pos.data());
      skip("the plugin does not give " + what + " (unsupported): " + why);
    }
    g.ref->forward(xr.data(), n_tok, nullptr, r.pos.data());
    if (view) {
      expect(b.view != nullptr, what + ": succeeded without a view pointer");
      lg.assign(b.view, b.view + lg.size());
    }
    if (!x_out) expect(std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0, what + ": x was written without FISH_FORWARD_X_OUT");
    Compare heads, stream;
    if (x_out) stream.add(g.s, x.data(), xr.data(), n_tok, what);
    for (int t = 0, k = 0; t < n_tok; ++t) {
      if (!r.want[size_t(t)]) continue;
      const std::vector<double> got(lg.begin() + ptrdiff_t(size_t(k) * kVocab), lg.begin() + ptrdiff_t(size_t(k + 1) * kVocab));
      const std::vector<double> want_l = ref_row_logits(g.s, xr.data() + size_t(t) * E);
      heads.add_logits(got.data(), want_l.data(), what + " row " + std::to_string(t));
      ++k;
    }
    heads.require();
    if (x_out) stream.require();
    return "logits " + heads.summary() + (x_out ? "; stream " + stream.summary() : "; x untouched");
  };

  head_check("span_set_head", [&]() -> std::string {
    hw = g.be->upload(desc_of(g.s.head));
    expect(hw != nullptr, "upload " + g.s.head.name + ": " + g.be->last_error());
    if (!g.be->span_set_head(g.span, hw, g.s.head_norm.data())) {
      const std::string why = g.be->last_error();
      const bool unsupported = g.be->last_status() == FISH_E_UNSUPPORTED;
      g.be->release(hw);
      hw = nullptr;
      if (!unsupported) fail("span_set_head: " + why);
      no_head = "the plugin has no span head (" + why + ")";
      skip(no_head);
    }
    attached = true;
    const uint64_t held = g.be->bytes_resident();
    g.be->release(hw);
    expect(g.be->bytes_resident() == held, "release() of the attached head was not refused");
    return "attached; release() of the attached head refused";
  });
  head_check("the last row's logits without x out", [&]() -> std::string {
    return logits_rows(1, {1}, false, false, "the last row's logits without x out");
  });
  head_check("the last row's logits through the view", [&]() -> std::string {
    return logits_rows(2, {0, 1}, true, false, "the last row's logits through the view");
  });
  head_check("logits of several rows (copied) and x out", [&]() -> std::string {
    return logits_rows(4, {1, 0, 1, 1}, false, true, "logits of rows 0, 2, 3 (copied) and x out");
  });
  head_check("logits of several rows through the view", [&]() -> std::string {
    return logits_rows(3, {1, 1, 1}, true, false, "logits of every row through the view");
  });
  head_check("without a head: refused, x and the view untouched", [&]() -> std::string {
    expect(g.be->span_set_head(g.span, nullptr, nullptr), "span_set_head(NULL): " + g.be->last_error());
    attached = false;
    Rows r;
    r.add(0, g.ref->len(0), 1, true);
    const std::string msg = g.refused(r, FISH_E_INVALID_ARGUMENT, "logits without a head", rng, true);
    g.kv_is(0, g.ref->len(0), "after the refused forward");
    return "\"" + msg + "\"";
  });
  if (attached) g.be->span_set_head(g.span, nullptr, nullptr);
  if (hw) g.be->release(hw);
}

void run_variant(Runner& run, const PluginLibrary* lib, const std::string& name, const Variant& v, std::mt19937_64& rng) {
  const std::string tag = "span " + v.name + " " + ggml_type_name(v.type);
  SpanRig g;
  uint64_t resident0 = 0;
  bool ok = true;       // a failed step fails the later ones (they depend on it)
  std::string no_span;  // why this shape's checks are skipped (set by "create")
  // cascades: a failure fails the later steps (false for a step that only
  // checks refusals and leaves the span as it was).
  auto step = [&](const std::string& what, auto&& body, bool cascades = true) {
    run.check(
        tag + ": " + what,
        [&]() -> std::string {
          if (!no_span.empty()) skip(no_span);
          if (!ok) fail("an earlier step of this span failed");
          try {
            return body();
          } catch (const CheckSkip&) {
            throw;
          } catch (...) {
            if (cascades) ok = false;
            throw;
          }
        },
        true);
  };
  auto at_end = [&](int n) {  // n rows of sequence 0 at its end
    Rows r;
    r.add(0, g.ref->len(0), n);
    return r;
  };

  step("create", [&]() -> std::string {
    g.be = new_backend(lib, name);
    for (GgmlType t : {v.type, GgmlType::F32})
      if (!g.be->supports(t)) no_span = ggml_type_name(t) + " is not supported";
    if (!no_span.empty()) skip(no_span);
    g.s = make_synth(v, rng);
    upload_synth(*g.be, g.s);
    resident0 = g.be->bytes_resident();
    // Sized as the host does before uploading (no weights), then created.
    const std::vector<SpanLayer> bare = without_weights(g.s.desc);
    SpanDesc d = span_desc(g.s, kCtx, 1);
    d.layers = bare;
    const uint64_t estimate = g.be->span_bytes(d);
    if (estimate > 0) g.span = g.be->span_create(span_desc(g.s, kCtx, 1));
    if (!g.span && g.be->last_status() == FISH_E_UNSUPPORTED) {  // a shape the plugin does not implement
      no_span = "the plugin does not run this shape (" + g.be->last_error() + ")";
      release_synth(*g.be, g.s);
      skip(no_span);
    }
    expect(estimate > 0, "span_bytes without weights: " + g.be->last_error());
    expect(g.span != nullptr, "span_create: " + g.be->last_error());
    const uint64_t used = g.be->bytes_resident() - resident0;
    const uint64_t kv_min = uint64_t(v.n_layers) * kCtx * uint64_t(v.n_head_kv * v.head_dim) * 2 * 2;  // f16 K+V
    expect(estimate >= kv_min, "span_bytes " + std::to_string(estimate) + " is less than even an f16 KV (" +
                                   std::to_string(kv_min) + ")");
    expect(used > 0 && used <= estimate, "span_create took " + std::to_string(used) + " bytes, span_bytes said " +
                                             std::to_string(estimate));
    g.ref = std::make_unique<RefSpan>(*g.be, g.s, 1, 256);
    g.kv_is(0, 0, "after span_create");
    return "span_bytes " + std::to_string(estimate) + ", resident +" + std::to_string(used);
  });

  step("prefill 70 + decode 3 ≡ per-matmul", [&]() -> std::string {
    Compare cmp;
    g.both(at_end(70), cmp, "prefill", rng);
    for (int i = 0; i < 3; ++i) g.both(at_end(1), cmp, "decode at " + std::to_string(70 + i), rng);
    g.kv_is(0, 73, "after 73 positions");
    cmp.require();
    return cmp.summary();
  });

  step("gap refused", [&]() -> std::string {
    Rows r;
    r.add(0, 74, 1);
    const std::string msg = g.refused(r, FISH_E_RANGE, "a row at 74 after 73 positions", rng);
    g.kv_is(0, 73, "after the refused gap");
    return "\"" + msg + "\"";
  });

  step("truncate and continue", [&]() -> std::string {
    expect(g.be->span_kv_truncate(g.span, 0, 50), "span_kv_truncate(50): " + g.be->last_error());
    g.ref->truncate(0, 50);
    g.kv_is(0, 50, "after truncating to 50");
    Compare cmp;
    g.both(at_end(2), cmp, "2 rows at 50", rng);
    g.kv_is(0, 52, "after 2 more");
    expect(!g.be->span_kv_truncate(g.span, 0, 60), "span_kv_truncate(60) with 52 positions was accepted");
    expect(g.be->last_status() == FISH_E_RANGE, "span_kv_truncate(60) with 52 positions: status " +
                                                     std::string(status_name(g.be->last_status())) + ", expected out of range");
    cmp.require();
    return cmp.summary() + "; truncate past the end refused";
  });

  step("capacity refused, then span_kv_reserve", [&]() -> std::string {
    const std::string msg = g.refused(at_end(50), FISH_E_RANGE, "50 rows at 52 with capacity " + std::to_string(kCtx), rng);
    g.kv_is(0, 52, "after the refused overflow");
    const uint64_t r0 = g.be->bytes_resident();
    expect(g.be->span_kv_reserve(g.span, 128), "span_kv_reserve(128): " + g.be->last_error());
    expect(g.be->bytes_resident() >= r0, "bytes_resident shrank after span_kv_reserve");
    Compare cmp;
    g.both(at_end(50), cmp, "50 rows at 52 after reserve", rng);
    g.kv_is(0, 102, "after the reserve + 50 rows");
    cmp.require();
    return "\"" + msg + "\"; after reserve: " + cmp.summary();
  });

  step("redo positions (first row before the KV length)", [&]() -> std::string {
    Compare cmp;
    Rows r;
    r.add(0, 100, 3);
    g.both(r, cmp, "3 rows at 100 (replacing 100, 101)", rng);
    g.kv_is(0, 103, "after redoing from 100");
    cmp.require();
    return cmp.summary();
  });

  step("a forward without x out leaves x untouched and fills the KV", [&]() -> std::string {
    const Rows r = at_end(2);
    std::vector<float> x = random_vector(size_t(2 * v.n_embd), 1.0f, rng), before = x, xr = x;
    SpanBatch b;
    b.n_tok = 2;
    b.x = x.data();
    b.pos = r.pos.data();
    expect(g.be->span_forward_once(g.span, b), "span_forward without flags: " + g.be->last_error());
    expect(std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0, "x was written without FISH_FORWARD_X_OUT");
    g.ref->forward(xr.data(), 2, nullptr, r.pos.data());
    g.kv_is(0, 105, "after 2 rows without x out");
    Compare cmp;  // the next row reads the KV those two rows wrote
    g.both(at_end(1), cmp, "1 row at 105", rng);
    cmp.require();
    return "x untouched; the next row " + cmp.summary();
  });

  step("bad batches refused, x untouched", [&]() -> std::string {
    const int p = g.ref->len(0);
    Rows other;
    other.add(1, 0, 1);
    const std::string m1 = g.refused(other, FISH_E_INVALID_ARGUMENT, "sequence 1 on a one-sequence span", rng);
    Rows neg;
    neg.add(-1, 0, 1);
    g.refused(neg, FISH_E_INVALID_ARGUMENT, "sequence -1", rng);
    Rows gap;  // p, p+2: a gap within the batch
    gap.add(0, p, 1);
    gap.add(0, p + 2, 1);
    g.refused(gap, FISH_E_INVALID_ARGUMENT, "a gap within the batch", rng);
    Rows back;  // p, p: a position repeated
    back.add(0, p, 1);
    back.add(0, p, 1);
    g.refused(back, FISH_E_INVALID_ARGUMENT, "a position repeated in the batch", rng);
    Rows wants;
    wants.add(0, p, 1, true);
    g.refused(wants, FISH_E_INVALID_ARGUMENT, "logits without a head", rng, true);
    Rows none;
    g.refused(none, FISH_E_INVALID_ARGUMENT, "an empty batch (n_tok 0)", rng);
    g.kv_is(0, p, "after the refused batches");
    expect(g.be->span_kv_len(g.span, 1) < 0 && g.be->last_status() == FISH_E_INVALID_ARGUMENT,
           "span_kv_len of sequence 1 on a one-sequence span did not fail with invalid argument");
    expect(!g.be->span_kv_truncate(g.span, -1, 0) && g.be->last_status() == FISH_E_INVALID_ARGUMENT,
           "span_kv_truncate of sequence -1 did not fail with invalid argument");
    return "\"" + m1 + "\"; a negative sequence, gaps, repeats, logits without a head, n_tok 0 refused";
  }, false);

  run_head_checks(run, tag, g, ok, no_span, rng);

  step("destroy releases its memory", [&]() -> std::string {
    g.be->span_destroy(g.span);
    g.span = nullptr;
    expect(g.be->bytes_resident() == resident0, "bytes_resident " + std::to_string(g.be->bytes_resident()) +
                                                    " after span_destroy, " + std::to_string(resident0) + " before create");
    release_synth(*g.be, g.s);
    expect(g.be->bytes_resident() == 0, "bytes_resident " + std::to_string(g.be->bytes_resident()) + " after releasing all");
    return "back to " + std::to_string(resident0) + " then 0 bytes";
  });
}

}  // namespace

void run_span_checks(Runner& run, const PluginLibrary* lib, const std::string& name) {
  {
    auto be = new_backend(lib, name);
    if (!be->has_spans()) {
      run.check("span", []() -> std::string { skip("the plugin has no span support"); });
      return;
    }
  }
  // Each shape its own stream: its data do not depend on what earlier checks drew.
  for (size_t i = 0; i < span_variants().size(); ++i) {
    std::mt19937_64 rng(run.seed() + 17 + 1000 * i);
    run_variant(run, lib, name, span_variants()[i], rng);
  }
  run_sequence_checks(run, lib, name);
  run_refusal_checks(run, lib, name);
  run_moe_checks(run, lib, name);
}

}  // namespace fish::backend::conf
