// Conformance suite: supports(), matmul per type and n_tok, matmul_group, the
// budget overrun, bad arguments.
#include <algorithm>
#include <cstring>

#include "backend/conformance_internal.h"
#include "backend/host_services.h"

namespace fish::backend::conf {

namespace {

constexpr int kNTok[] = {1, 3, 37, 256};

// Uploads w, failing the check with the backend's message when refused.
BackendWeight* upload_or_fail(PluginBackend& be, const TestWeight& w) {
  BackendWeight* h = be.upload(desc_of(w));
  expect(h != nullptr, "upload " + w.name + " (" + ggml_type_name(w.type) + "): " + be.last_error());
  return h;
}

// Shapes per type: rows not a multiple of any likely workgroup size, and for the
// 32-blocks an n_in that is not a multiple of 256 either.
std::vector<std::pair<int64_t, int64_t>> shapes_for(GgmlType t) {
  const int bs = ggml_type_info(t)->block_size;
  if (bs == 256) return {{67, 512}, {5, 768}};
  return {{67, 512}, {130, 224}};
}

}  // namespace

void run_matmul_checks(Runner& run, const PluginLibrary* lib, const std::string& name) {
  std::mt19937_64 rng(run.seed());
  std::vector<GgmlType> supported;

  run.check("supports", [&]() -> std::string {
    auto be = new_backend(lib, name);
    std::string list;
    for (GgmlType t : test_types())
      if (be->supports(t)) {
        supported.push_back(t);
        if (!list.empty()) list += ' ';
        list += ggml_type_name(t);
      }
    expect(!be->supports(GgmlType(9999)), "claims to support GGUF type 9999");
    expect(!supported.empty(), "supports none of the types the suite knows");
    return list;
  });

  // ---- matmul per type × n_tok ------------------------------------------------------
  for (GgmlType t : test_types()) {
    const bool sup = std::find(supported.begin(), supported.end(), t) != supported.end();
    for (const auto& out_in : shapes_for(t)) {
      // Plain variables: the check lambdas capture them (clang 14 cannot capture structured bindings).
      const int64_t n_out = out_in.first, n_in = out_in.second;
      const std::string shape = "[" + std::to_string(n_out) + "x" + std::to_string(n_in) + "]";
      if (!sup) {
        run.check("matmul " + ggml_type_name(t) + " " + shape,
                  [&]() -> std::string { skip("not supported by the plugin"); });
        continue;
      }
      // One backend and one upload per shape; every n_tok runs on it.
      std::unique_ptr<PluginBackend> be;
      TestWeight w;
      BackendWeight* h = nullptr;
      std::string setup_err;
      try {
        be = new_backend(lib, name);
        w = make_weight(t, n_out, n_in, 1.0f, rng, "conf." + ggml_type_name(t) + shape);
        h = be->upload(desc_of(w));
        if (!h) setup_err = "upload: " + be->last_error();
      } catch (const CheckFail& f) {
        setup_err = f.detail;
      } catch (const std::exception& e) {
        setup_err = e.what();
      }
      for (int n_tok : kNTok) {
        run.check("matmul " + ggml_type_name(t) + " " + shape + " n_tok=" + std::to_string(n_tok), [&]() -> std::string {
          expect(setup_err.empty(), setup_err);
          const std::vector<float> x = random_vector(size_t(n_tok * n_in), 1.0f, rng);
          std::vector<float> y(size_t(n_tok * n_out), -12345.0f);
          expect(be->matmul(h, x.data(), n_tok, y.data()), "matmul: " + be->last_error());
          std::string where;
          const double r = bound_ratio(w, x.data(), n_tok, y.data(), &where);
          expect(r <= 1.0, "error " + fmt(r) + " x the bound at " + where);
          return "max error " + fmt(r) + " of the bound";
        });
      }
      if (h) be->release(h);
    }
  }

  // ---- matmul_group ----------------------------------------------------------------
  run.check("matmul_group", [&]() -> std::string {
    if (supported.empty()) skip("no supported type");
    auto be = new_backend(lib, name);
    // Three weights on one input (q/k/v-like), types taken from what is supported.
    const int64_t n_in = 512;
    const int64_t outs[3] = {67, 33, 130};
    std::vector<TestWeight> ws;
    std::vector<BackendWeight*> hs;
    for (int i = 0; i < 3; ++i) {
      ws.push_back(make_weight(supported[size_t(i) % supported.size()], outs[i], n_in, 1.0f, rng,
                               "conf.group." + std::to_string(i)));
      hs.push_back(upload_or_fail(*be, ws.back()));
    }
    double worst = 0;
    for (int n_tok : kNTok) {
      const std::vector<float> x = random_vector(size_t(n_tok * n_in), 1.0f, rng);
      std::vector<std::vector<float>> ys(3);
      std::vector<float*> yp;
      for (int i = 0; i < 3; ++i) {
        ys[size_t(i)].assign(size_t(n_tok * outs[i]), -12345.0f);
        yp.push_back(ys[size_t(i)].data());
      }
      expect(be->matmul_group(hs.data(), 3, x.data(), n_tok, yp.data()), "matmul_group: " + be->last_error());
      for (int i = 0; i < 3; ++i) {
        std::string where;
        const double r = bound_ratio(ws[size_t(i)], x.data(), n_tok, yp[size_t(i)], &where);
        expect(r <= 1.0, "weight " + std::to_string(i) + " n_tok " + std::to_string(n_tok) + ": error " + fmt(r) +
                             " x the bound at " + where);
        worst = std::max(worst, r);
      }
    }
    for (auto* h : hs) be->release(h);
    return "3 weights, n_tok 1/3/37/256, max error " + fmt(worst) + " of the bound";
  });

  // ---- budget ----------------------------------------------------------------------
  run.check("upload beyond the budget fails cleanly", [&]() -> std::string {
    if (supported.empty()) skip("no supported type");
    const GgmlType t = std::find(supported.begin(), supported.end(), GgmlType::F32) != supported.end()
                           ? GgmlType::F32
                           : supported.front();
    const uint64_t budget = 4ull << 20;
    auto be = new_backend(lib, name, budget);
    expect(be->open(), "open: " + be->last_error());
    const uint64_t free0 = be->memory_free();
    expect(free0 <= budget, "memory_free " + std::to_string(free0) + " exceeds the budget " + std::to_string(budget));
    const uint64_t base = be->bytes_resident();
    TestWeight small = make_weight(t, 64, 512, 1.0f, rng, "conf.budget.small");
    BackendWeight* hs = upload_or_fail(*be, small);
    const uint64_t after_small = be->bytes_resident();
    expect(after_small >= base + small.bytes.size() && after_small <= budget,
           "bytes_resident " + std::to_string(after_small) + " after a " + std::to_string(small.bytes.size()) +
               "-byte upload");
    // A weight larger than the whole budget: must fail, allocate nothing, leave a message.
    const int64_t rows = int64_t(budget / small.bytes.size() * 64 * 2);
    TestWeight big = make_weight(t, rows, 512, 1.0f, rng, "conf.budget.big");
    BackendWeight* hb = be->upload(desc_of(big));
    if (hb) be->release(hb);
    expect(!hb, "a " + std::to_string(big.bytes.size()) + "-byte upload succeeded under a " + std::to_string(budget) +
                    "-byte budget");
    expect(be->last_status() == FISH_E_OUT_OF_MEMORY,
           std::string("status ") + status_name(be->last_status()) + ", expected out of memory");
    const std::string msg = be->last_error();
    expect(!msg.empty(), "no message after the refused upload");
    expect(be->bytes_resident() == after_small, "bytes_resident changed after the refused upload");
    // The backend goes on: the small weight still multiplies correctly, release frees it.
    const std::vector<float> x = random_vector(3 * 512, 1.0f, rng);
    std::vector<float> y(3 * 64);
    expect(be->matmul(hs, x.data(), 3, y.data()), "matmul after the refusal: " + be->last_error());
    expect(bound_ratio(small, x.data(), 3, y.data(), nullptr) <= 1.0, "matmul after the refusal is wrong");
    be->release(hs);
    expect(be->bytes_resident() == base, "bytes_resident " + std::to_string(be->bytes_resident()) +
                                             " after releasing everything (was " + std::to_string(base) + ")");
    TestWeight again = make_weight(t, 256, 512, 1.0f, rng, "conf.budget.again");
    BackendWeight* ha = upload_or_fail(*be, again);
    be->release(ha);
    return "refused " + std::to_string(big.bytes.size()) + " bytes under " + std::to_string(budget) + ": \"" + msg + "\"";
  });

  // ---- bad arguments -----------------------------------------------------------------
  run.check("bad arguments are refused with a message", [&]() -> std::string {
    if (supported.empty()) skip("no supported type");
    auto be = new_backend(lib, name);
    const GgmlType t = supported.front();
    TestWeight w = make_weight(t, 16, 512, 1.0f, rng, "conf.args");
    BackendWeight* h = upload_or_fail(*be, w);
    std::vector<float> x(512 * 2, 0.5f), y(16 * 2);
    int refused = 0;
    auto must_fail = [&](bool ok, const std::string& what) {
      expect(!ok, what + " was accepted");
      expect(!be->last_error().empty(), what + ": no message");
      ++refused;
    };
    must_fail(be->matmul(h, x.data(), 0, y.data()), "matmul with n_tok 0");
    WeightDesc d = desc_of(w);
    d.type = GgmlType(9999);
    must_fail(be->upload(d) != nullptr, "upload of type 9999");
    d = desc_of(w);
    d.nbytes = w.bytes.size() - 1;
    must_fail(be->upload(d) != nullptr, "upload with nbytes not matching the shape");
    const int bs = ggml_type_info(t)->block_size;
    if (bs > 1) {
      d = desc_of(w);
      d.n_in = 512 + bs / 2;
      must_fail(be->upload(d) != nullptr, "upload with n_in not a multiple of the block size");
    }
    d = desc_of(w);
    d.data = nullptr;
    must_fail(be->upload(d) != nullptr, "upload without data");
    expect(be->matmul(h, x.data(), 2, y.data()), "a good matmul after the refusals failed: " + be->last_error());
    expect(bound_ratio(w, x.data(), 2, y.data(), nullptr) <= 1.0, "a good matmul after the refusals is wrong");
    be->release(h);
    return std::to_string(refused) + " bad calls refused; the backend still works";
  });
}

}  // namespace fish::backend::conf
