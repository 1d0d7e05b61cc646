// Conformance suite: a span of several sequences (each with its own KV) against
// the per-matmul reference: sequences apart, several in one batch, rows
// interleaved, the logits of each sequence's last row, truncating and dropping
// one, span_kv_copy (a copied prefix continued ≡ the same computed from
// scratch), bad sequence ids and gaps, span_kv_reserve for all.
//
// A plugin that holds one sequence per span, or runs one sequence per forward,
// refuses with FISH_E_UNSUPPORTED: those checks are skipped with its reason,
// never passed.
#include <algorithm>
#include <cstring>

#include "backend/conformance_synth.h"
#include "backend/host_services.h"

namespace fish::backend::conf {

namespace {

constexpr int kCtx = 96;  // positions per sequence at creation
constexpr int kSeq = 3;

}  // namespace

void run_sequence_checks(Runner& run, const PluginLibrary* lib, const std::string& name) {
  std::mt19937_64 rng(run.seed() + 29);
  const Variant& v = span_variants()[0];
  const int E = v.n_embd;
  SpanRig g;
  uint64_t resident0 = 0;
  bool ok = true;       // a failed step fails the later ones; a skipped one does not
  bool mixed = false;   // the plugin runs batches of several sequences
  std::string no_seqs;  // why every check here is skipped
  auto step = [&](const std::string& what, auto&& body) {
    run.check(
        "sequences: " + what,
        [&]() -> std::string {
          if (!no_seqs.empty()) skip(no_seqs);
          if (!ok) fail("an earlier step of the sequence checks failed");
          try {
            return body();
          } catch (const CheckSkip&) {
            throw;
          } catch (...) {
            ok = false;
            throw;
          }
        },
        true);
  };
  auto len = [&](int q) { return g.ref->len(q); };
  auto kv_all = [&](const std::string& when) {
    for (int q = 0; q < kSeq; ++q) g.kv_is(q, len(q), when);
  };

  step("a span of 3 sequences", [&]() -> std::string {
    g.be = new_backend(lib, name);
    if (!g.be->supports(GgmlType::F32)) {
      no_seqs = "F32 is not supported";
      skip(no_seqs);
    }
    g.s = make_synth(v, rng);
    upload_synth(*g.be, g.s);
    resident0 = g.be->bytes_resident();
    const uint64_t one = g.be->span_bytes(span_desc(g.s, kCtx, 1));
    const uint64_t estimate = g.be->span_bytes(span_desc(g.s, kCtx, kSeq));
    g.span = g.be->span_create(span_desc(g.s, kCtx, kSeq));
    if (!g.span) {
      const std::string why = g.be->last_error();
      const bool unsupported = g.be->last_status() == FISH_E_UNSUPPORTED;
      release_synth(*g.be, g.s);
      if (!unsupported) fail("span_create with n_seq 3: " + why);
      no_seqs = "the plugin holds one sequence per span (" + why + ")";
      skip(no_seqs);
    }
    const uint64_t used = g.be->bytes_resident() - resident0;
    const uint64_t kv_min = uint64_t(kSeq) * uint64_t(v.n_layers) * kCtx * uint64_t(v.n_head_kv * v.head_dim) * 2 * 2;
    expect(estimate >= kv_min && estimate > one, "span_bytes for 3 sequences is " + std::to_string(estimate) +
                                                     " (one sequence: " + std::to_string(one) + ", an f16 KV for three: " +
                                                     std::to_string(kv_min) + ")");
    expect(used > 0 && used <= estimate, "span_create took " + std::to_string(used) + " bytes, span_bytes said " +
                                             std::to_string(estimate));
    g.ref = std::make_unique<RefSpan>(*g.be, g.s, kSeq, 256);
    kv_all("after span_create");
    return "span_bytes " + std::to_string(estimate) + " (one sequence: " + std::to_string(one) + "), resident +" +
           std::to_string(used);
  });

  step("each sequence its own KV", [&]() -> std::string {
    Compare cmp;
    Rows a, b;
    a.add(0, 0, 12);
    b.add(1, 0, 9);
    g.both(a, cmp, "12 rows of sequence 0", rng);
    g.both(b, cmp, "9 rows of sequence 1", rng);
    for (int q = 0; q < kSeq; ++q) {  // one more row each: it sees its own sequence only
      Rows r;
      r.add(q, len(q), 1);
      g.both(r, cmp, "a row of sequence " + std::to_string(q), rng);
    }
    kv_all("after a prefill and a row each");
    cmp.require();
    return cmp.summary();
  });

  step("several sequences in one batch", [&]() -> std::string {
    Compare cmp;
    Rows r;
    r.add(2, len(2), 5);
    r.add(0, len(0), 2);
    r.add(1, len(1), 3);
    g.both(r, cmp, "a batch of sequences 2, 0, 1", rng, true);
    mixed = true;
    kv_all("after the batch");
    cmp.require();
    return cmp.summary();
  });

  step("rows of several sequences interleaved", [&]() -> std::string {
    Compare cmp;
    Rows r;
    const int l0[kSeq] = {len(0), len(1), len(2)};
    for (int i = 0; i < 3; ++i)
      for (int q = 0; q < kSeq; ++q) r.add(q, l0[q] + i, 1);
    g.both(r, cmp, "rows interleaved (0, 1, 2, 0, 1, 2, ...)", rng, true);
    kv_all("after the interleaved batch");
    cmp.require();
    return cmp.summary();
  });

  step("logits of each sequence's last row in one batch", [&]() -> std::string {
    BackendWeight* hw = g.be->upload(desc_of(g.s.head));
    expect(hw != nullptr, "upload " + g.s.head.name + ": " + g.be->last_error());
    struct Detach {  // the head goes again whatever happens below
      SpanRig& g;
      BackendWeight* hw;
      bool attached = false;
      ~Detach() {
        if (attached) g.be->span_set_head(g.span, nullptr, nullptr);
        g.be->release(hw);
      }
    } detach{g, hw};
    if (!g.be->span_set_head(g.span, hw, g.s.head_norm.data())) {
      if (g.be->last_status() == FISH_E_UNSUPPORTED) skip("the plugin has no span head (" + g.be->last_error() + ")");
      fail("span_set_head: " + g.be->last_error());
    }
    detach.attached = true;
    Rows r;
    r.add(1, len(1), 2);
    r.want.back() = 1;
    r.add(0, len(0), 1, true);
    r.add(2, len(2), 3);
    r.want.back() = 1;
    std::vector<float> x = random_vector(size_t(r.n()) * E, 1.0f, rng), xr = x;
    std::vector<float> lg(size_t(r.n_wanted()) * kVocab, NAN);
    SpanBatch b;
    b.n_tok = r.n();
    b.x = x.data();
    b.seq = r.seq.data();
    b.pos = r.pos.data();
    b.logits_rows = r.want.data();
    b.logits = lg.data();
    if (!g.be->span_forward_once(g.span, b)) {
      if (g.be->last_status() == FISH_E_UNSUPPORTED)
        skip("the plugin does not give the logits of several sequences in one batch (" + g.be->last_error() + ")");
      fail("span_forward: " + g.be->last_error());
    }
    g.ref->forward(xr.data(), r.n(), r.seq.data(), r.pos.data());
    Compare heads;
    for (int t = 0, k = 0; t < r.n(); ++t)
      if (r.want[size_t(t)]) {
        const std::vector<double> got(lg.begin() + ptrdiff_t(size_t(k) * kVocab), lg.begin() + ptrdiff_t(size_t(k + 1) * kVocab));
        const std::vector<double> want = ref_row_logits(g.s, xr.data() + size_t(t) * E);
        heads.add_logits(got.data(), want.data(), "sequence " + std::to_string(r.seq[size_t(t)]) + "'s last row");
        ++k;
      }
    kv_all("after the batch with logits");
    heads.require();
    return "logits in row order: " + heads.summary();
  });

  step("truncate and drop one sequence, the others unchanged", [&]() -> std::string {
    expect(g.be->span_kv_truncate(g.span, 1, 5), "span_kv_truncate(1, 5): " + g.be->last_error());
    g.ref->truncate(1, 5);
    expect(g.be->span_kv_truncate(g.span, 2, 0), "span_kv_truncate(2, 0) (drop): " + g.be->last_error());
    g.ref->truncate(2, 0);
    kv_all("after truncating sequence 1 to 5 and dropping sequence 2");
    Compare cmp;
    Rows a, b, c;
    a.add(0, len(0), 1);
    b.add(1, 5, 2);
    c.add(2, 0, 3);
    g.both(a, cmp, "sequence 0 goes on", rng);
    g.both(b, cmp, "sequence 1 from 5", rng);
    g.both(c, cmp, "sequence 2 anew", rng);
    kv_all("after going on");
    expect(!g.be->span_kv_truncate(g.span, 1, len(1) + 1) && g.be->last_status() == FISH_E_RANGE,
           "truncating sequence 1 past its length was not refused as out of range");
    expect(!g.be->span_kv_truncate(g.span, kSeq, 0) && g.be->last_status() == FISH_E_INVALID_ARGUMENT,
           "truncating sequence 3 of 3 was not refused as invalid");
    cmp.require();
    return cmp.summary() + "; past the end and a bad id refused";
  });

  step("span_kv_copy: a copied prefix continued ≡ the same rows from scratch", [&]() -> std::string {
    if (!g.be->has_span_kv_copy()) skip("the plugin has no span_kv_copy");
    for (int q = 0; q < kSeq; ++q) {
      expect(g.be->span_kv_truncate(g.span, q, 0), "drop sequence " + std::to_string(q) + ": " + g.be->last_error());
      g.ref->truncate(q, 0);
    }
    const std::vector<float> x0 = random_vector(size_t(10) * E, 1.0f, rng);  // the shared prefix's inputs
    const std::vector<float> y = random_vector(size_t(3) * E, 1.0f, rng);    // the continuation's
    Compare cmp;
    Rows prefix, cont1, head2, cont2;
    prefix.add(0, 0, 10);
    g.both(prefix, cmp, "10 rows of sequence 0", rng, false, &x0);
    expect(g.be->span_kv_copy(g.span, 0, 1, 0, 6), "span_kv_copy(0 -> 1, [0, 6)): " + g.be->last_error());
    g.ref->copy(0, 1, 0, 6);
    g.kv_is(1, 6, "after copying 6 positions into it");
    cont1.add(1, 6, 3);
    g.both(cont1, cmp, "sequence 1 after the copy", rng, false, &y);
    const std::vector<float> copied = g.xs;
    // The same rows from scratch on sequence 2: the prefix's first 6 inputs, then the continuation.
    const std::vector<float> x6(x0.begin(), x0.begin() + ptrdiff_t(6 * E));
    head2.add(2, 0, 6);
    cont2.add(2, 6, 3);
    g.both(head2, cmp, "sequence 2 from scratch", rng, false, &x6);
    g.both(cont2, cmp, "sequence 2's continuation", rng, false, &y);
    Compare same;
    same.add(g.s, copied.data(), g.xs.data(), 3, "copied prefix vs from scratch");
    expect(!g.be->span_kv_copy(g.span, 0, 1, 0, 11) && g.be->last_status() == FISH_E_RANGE,
           "copying 11 positions of a 10-position sequence was not refused as out of range");
    expect(!g.be->span_kv_copy(g.span, 0, 2, 10, 10) && g.be->last_status() == FISH_E_RANGE,
           "copying to position 10 of a 9-position sequence (a gap) was not refused as out of range");
    expect(!g.be->span_kv_copy(g.span, 0, kSeq, 0, 1) && g.be->last_status() == FISH_E_INVALID_ARGUMENT,
           "copying into sequence 3 of 3 was not refused as invalid");
    expect(g.be->span_kv_copy(g.span, 1, 1, 0, 3), "span_kv_copy of a sequence onto itself: " + g.be->last_error());
    kv_all("after the copies");
    cmp.require();
    same.require(1e-3);
    return "copied vs from scratch: " + same.summary() + "; against the reference: " + cmp.summary() +
           "; bad ranges and ids refused";
  });

  step("bad sequence ids and gaps refused, x untouched", [&]() -> std::string {
    Rows bad, neg, gap;
    bad.add(kSeq, 0, 1);
    neg.add(-1, 0, 1);
    gap.add(1, len(1) + 1, 1);
    const std::string m = g.refused(bad, FISH_E_INVALID_ARGUMENT, "sequence 3 of 3", rng);
    g.refused(neg, FISH_E_INVALID_ARGUMENT, "sequence -1", rng);
    g.refused(gap, FISH_E_RANGE, "a gap in sequence 1", rng);
    if (mixed) {  // one sequence's gap refuses the whole batch
      Rows both_seqs;
      both_seqs.add(0, len(0), 1);
      both_seqs.add(1, len(1) + 2, 1);
      g.refused(both_seqs, FISH_E_RANGE, "a batch with a gap in one of its sequences", rng);
    }
    expect(g.be->span_kv_len(g.span, kSeq) < 0 && g.be->last_status() == FISH_E_INVALID_ARGUMENT,
           "span_kv_len of sequence 3 of 3 did not fail with invalid argument");
    kv_all("after the refused batches");
    return "\"" + m + "\"; -1, gaps" + std::string(mixed ? " (also in a mixed batch)" : "") + " refused";
  });

  step("span_kv_reserve grows every sequence", [&]() -> std::string {
    Rows over1, over2;
    over1.add(1, len(1), kCtx - len(1) + 3);
    over2.add(2, len(2), kCtx - len(2) + 5);
    g.refused(over1, FISH_E_RANGE, "sequence 1 past the capacity " + std::to_string(kCtx), rng);
    expect(g.be->span_kv_reserve(g.span, kCtx + 40), "span_kv_reserve: " + g.be->last_error());
    Compare cmp;
    g.both(over1, cmp, "sequence 1 past the first capacity", rng);
    g.both(over2, cmp, "sequence 2 past the first capacity", rng);
    kv_all("after the reserve");
    cmp.require();
    return cmp.summary();
  });

  step("destroy releases its memory", [&]() -> std::string {
    g.be->span_destroy(g.span);
    g.span = nullptr;
    expect(g.be->bytes_resident() == resident0, "bytes_resident " + std::to_string(g.be->bytes_resident()) +
                                                    " after span_destroy, " + std::to_string(resident0) + " before create");
    release_synth(*g.be, g.s);
    return "back to " + std::to_string(resident0) + " bytes";
  });
}

}  // namespace fish::backend::conf
