// prepare_weight (16-row strips of Q4_K / Q5_K / Q6_K and the 32-element types) and the strip kernels:
//  * the repack is an exact byte permutation: every row comes back as its
//    GGUF bytes (weight_row_gguf), and padding rows of the last strip are zero;
//  * the scalar family on a prepared weight equals the scalar family on the
//    original bit for bit (it un-packs each row and calls vec_dot_ref);
//  * the AVX-512, AVX2 + AVX-VNNI and AVX2 strip kernels equal the scalar family
//    within the bound of test_matmul.cpp: |Δ| <= 5e-5 · M, M = Σ_i |ŵ_i| |x_i|
//    (both use the same int8 activations and exact integer block sums; only
//    the order of the f32 scale products and sums differs; a wrong quant or
//    scale moves y by ~M / n_in >= 1e-4 · M at these sizes). The 32-element
//    types get 2e-4 · M: there the scalar family quantises activations by
//    llama.cpp's rule (quantize_act.cpp: x · 127 / amax, ties to even) and the
//    SIMD families by the reference one (x / d, ties away), as the GPU
//    kernels do, so an element near a rounding boundary can differ by one
//    code (measured up to 5.7e-5 · M, the same for GGUF rows and strips); a
//    wrong offset or quant still moves y by far more;
//  * results do not depend on the thread count; matmul_group over prepared and
//    unprepared weights equals separate calls, bit for bit;
//  * other types and families are returned unchanged; bad views are refused.
// Each case runs on every strip family this CPU has; a CPU with neither is skipped (FISH_SKIP).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "cpu/matmul.h"
#include "cpu/thread_pool.h"
#include "matmul_test_data.h"
#include "quant/quant.h"
#include "test_skip.h"

using namespace fish;

namespace {

struct Matrix {
  GgmlType type;
  int64_t n_in, n_out;
  std::vector<uint8_t> data;
  WeightView view() const { return {type, data.data(), n_in, n_out, test::row_bytes_of(type, n_in)}; }
};

Matrix make_matrix(GgmlType t, int64_t n_in, int64_t n_out, uint64_t seed) {
  return Matrix{t, n_in, n_out, test::random_weights(t, n_in, n_out, seed)};
}

// M[t * n_out + r] = Σ_i |ŵ_ri| |x_ti|
std::vector<double> magnitudes(const Matrix& m, const std::vector<float>& x, int n_tok) {
  std::vector<float> row(size_t(m.n_in));
  std::vector<double> M(size_t(n_tok * m.n_out));
  const uint64_t rb = test::row_bytes_of(m.type, m.n_in);
  for (int64_t r = 0; r < m.n_out; ++r) {
    dequant_row(m.type, m.data.data() + rb * uint64_t(r), row.data(), m.n_in);
    for (int t = 0; t < n_tok; ++t) {
      double s = 0;
      for (int64_t i = 0; i < m.n_in; ++i) s += std::fabs(double(row[size_t(i)]) * x[size_t(t * m.n_in + i)]);
      M[size_t(t * m.n_out + r)] = s;
    }
  }
  return M;
}

std::vector<float> run(ThreadPool& pool, const WeightView& w, const std::vector<float>& x, int n_tok) {
  std::vector<float> y(size_t(n_tok * w.n_out), -12345.0f);
  matmul(pool, w, x.data(), n_tok, y.data());
  return y;
}

struct UseKernels {
  explicit UseKernels(MatmulKernels k) { matmul_use_kernels(k); }
  ~UseKernels() { matmul_use_default_kernels(); }
};

// The families with strip kernels that this CPU runs (AVX-512 VNNI, AVX2).
std::vector<MatmulKernels> strip_families() {
  std::vector<MatmulKernels> f;
  for (MatmulKernels k : {MatmulKernels::Avx512, MatmulKernels::AvxVnni, MatmulKernels::Avx2})
    if (matmul_kernels_supported(k)) f.push_back(k);
  return f;
}
const char* family_name(MatmulKernels k) {
  return k == MatmulKernels::Avx512 ? "avx512" : k == MatmulKernels::AvxVnni ? "avxvnni" : "avx2";
}
bool have_strips() { return !strip_families().empty(); }
constexpr const char* kNoStrips = "strip kernels: this CPU runs neither AVX-512 VNNI nor AVX2 (prepare_weight keeps GGUF rows)";

// prepare_weight under a family that makes strips (the layout is the same for every such family).
PreparedWeight prepare_strips(const WeightView& w, ThreadPool* pool = nullptr) {
  UseKernels use(strip_families().at(0));
  return prepare_weight(w, pool);
}

const GgmlType kStripTypes[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q4_0,
                                GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0};

// Row lengths per type: `base`, and for the 32-element types also lengths
// whose last strip-block holds fewer than 8 blocks (32, 96 = 3 blocks, Qwen2
// 0.5B's 896 = 3.5 strip-blocks).
std::vector<int64_t> lengths(GgmlType t, std::vector<int64_t> base) {
  if (ggml_type_info(t)->block_size == 32) base.insert(base.end(), {32, 96, 896});
  return base;
}

}  // namespace

TEST_CASE("prepare_weight: strips hold every row's GGUF bytes", "[matmul][prepare]") {
  if (!have_strips()) FISH_SKIP(kNoStrips);
  ThreadPool pool(2);
  for (GgmlType t : kStripTypes)
    for (int64_t n_in : lengths(t, {256, 2048}))
      for (int64_t n_out : {1, 15, 16, 37, 301}) {
        INFO(ggml_type_name(t) << " n_in " << n_in << " n_out " << n_out);
        const Matrix m = make_matrix(t, n_in, n_out, uint64_t(n_in + n_out) ^ uint64_t(t));
        const PreparedWeight p = prepare_strips(m.view(), n_out > 100 ? &pool : nullptr);
        REQUIRE(p.repacked());
        const WeightView& v = p.view();
        CHECK(v.layout == WeightLayout::Strips16);
        CHECK(v.type == t);
        CHECK(v.n_in == n_in);
        CHECK(v.n_out == n_out);
        CHECK(v.row_bytes == m.view().row_bytes);
        CHECK(v.data != m.view().data);
        const uint64_t rb = v.row_bytes, strips = uint64_t(n_out + 15) / 16;
        CHECK(p.owned_bytes() == strips * 16 * rb);
        std::vector<uint8_t> row(rb);
        for (int64_t r = 0; r < n_out; ++r) {
          weight_row_gguf(v, r, row.data());
          REQUIRE(std::memcmp(row.data(), m.data.data() + uint64_t(r) * rb, rb) == 0);
        }
        // Padding rows of the last strip read back as all-zero blocks.
        if (n_out % 16) {
          WeightView padded = v;
          padded.n_out = int64_t(strips * 16);
          for (int64_t r = n_out; r < padded.n_out; ++r) {
            weight_row_gguf(padded, r, row.data());
            for (uint8_t b : row) REQUIRE(b == 0);
          }
        }
      }
}

TEST_CASE("prepare_weights: one allocation for several weights, each as if prepared alone", "[matmul][prepare]") {
  if (!have_strips()) FISH_SKIP(kNoStrips);
  ThreadPool pool(2);
  const Matrix q4 = make_matrix(GgmlType::Q4_K, 512, 37, 1), q8 = make_matrix(GgmlType::Q3_K, 512, 20, 2),
               q6 = make_matrix(GgmlType::Q6_K, 512, 16, 3);
  const WeightView ws[3] = {q4.view(), q8.view(), q6.view()};
  PreparedWeight kept;
  std::vector<float> y_batch;
  const auto x = test::random_acts(512 * 3, 7);
  {
    UseKernels use(strip_families().at(0));
    std::vector<PreparedWeight> ps = prepare_weights(ws, 3, &pool);
    REQUIRE(ps.size() == 3);
    CHECK(ps[0].repacked());
    CHECK_FALSE(ps[1].repacked());
    CHECK(ps[1].view().data == q8.view().data);
    CHECK(ps[2].repacked());
    CHECK(ps[0].owned_bytes() == 3 * 16 * 144 * 2);  // 37 rows -> 3 strips of 2 blocks
    CHECK(ps[1].owned_bytes() == 0);
    CHECK(ps[2].owned_bytes() == 16 * 210 * 2);
    // Each one equals the same weight prepared alone, bit for bit.
    for (int i : {0, 2}) {
      const PreparedWeight alone = prepare_weight(ws[i]);
      REQUIRE(std::memcmp(run(pool, ps[size_t(i)].view(), x, 3).data(), run(pool, alone.view(), x, 3).data(),
                          size_t(3 * ws[i].n_out) * 4) == 0);
    }
    y_batch = run(pool, ps[2].view(), x, 3);
    kept = std::move(ps[2]);
  }  // the others are gone: the kept weight still holds the shared bytes
  UseKernels use(strip_families().at(0));
  const auto y = run(pool, kept.view(), x, 3);
  REQUIRE(std::memcmp(y.data(), y_batch.data(), y.size() * 4) == 0);
  CHECK(prepare_weights(ws, 0).empty());
}

TEST_CASE("prepare_weight: other types, families and empty weights are left as they are", "[matmul][prepare]") {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q2_K, GgmlType::Q3_K}) {
    INFO(ggml_type_name(t));
    const Matrix m = make_matrix(t, 256, 16, 1);
    const PreparedWeight p = prepare_weight(m.view());
    CHECK_FALSE(p.repacked());
    CHECK(p.owned_bytes() == 0);
    CHECK(p.view().data == m.view().data);
    CHECK(p.view().layout == WeightLayout::Gguf);
  }
  {
    UseKernels use(MatmulKernels::Scalar);
    const Matrix m = make_matrix(GgmlType::Q4_K, 256, 16, 1);
    const PreparedWeight p = prepare_weight(m.view());
    CHECK_FALSE(p.repacked());
    CHECK(p.view().data == m.view().data);
  }
  const Matrix m = make_matrix(GgmlType::Q6_K, 256, 16, 1);
  WeightView empty = m.view();
  empty.n_out = 0;
  CHECK_FALSE(prepare_weight(empty).repacked());
}

TEST_CASE("strip kernels equal the scalar family on the original weights", "[matmul][prepare]") {
  if (!have_strips()) FISH_SKIP(kNoStrips);
  ThreadPool pool(2);
  const int tok_counts[] = {1, 2, 3, 4, 5, 8, 13, 37};
  for (GgmlType t : kStripTypes)
    // 4608 and 8192: rows split in K chunks when there are many tokens.
    for (int64_t n_in : lengths(t, {256, 768, 2048, 4608, 8192}))
      for (int64_t n_out : {1, 7, 16, 33}) {
        const Matrix m = make_matrix(t, n_in, n_out, uint64_t(n_in * 131 + n_out) ^ uint64_t(t));
        const PreparedWeight p = prepare_strips(m.view());
        REQUIRE(p.repacked());
        const auto x = test::random_acts(n_in * 37, uint64_t(n_in + n_out));
        const auto M = magnitudes(m, x, 37);
        std::vector<float> ys;
        {
          UseKernels use(MatmulKernels::Scalar);
          ys = run(pool, m.view(), x, 37);
          // The scalar fallback on strips: the original's bits exactly.
          const auto yp = run(pool, p.view(), x, 37);
          INFO(ggml_type_name(t) << " n_in " << n_in << " n_out " << n_out << ": scalar on strips");
          REQUIRE(std::memcmp(yp.data(), ys.data(), ys.size() * 4) == 0);
        }
        for (MatmulKernels fam : strip_families()) {
        UseKernels use(fam);
        for (int n_tok : tok_counts) {
          INFO(family_name(fam) << " " << ggml_type_name(t) << " n_in " << n_in << " n_out " << n_out << " n_tok " << n_tok);
          const auto y = run(pool, p.view(), x, n_tok);
          for (int tk = 0; tk < n_tok; ++tk)
            for (int64_t r = 0; r < n_out; ++r) {
              const size_t o = size_t(tk * n_out + r);
              const double bound = (ggml_type_info(t)->block_size == 32 ? 2e-4 : 5e-5) * M[o];
              if (!(std::fabs(double(y[o]) - double(ys[o])) <= bound)) {
                INFO("token " << tk << " row " << r << " strips " << y[o] << " scalar " << ys[o] << " M " << M[o]);
                REQUIRE(std::fabs(double(y[o]) - double(ys[o])) <= bound);
              }
            }
        }
        }
      }
}

TEST_CASE("strip kernels: padding rows are not written", "[matmul][prepare]") {
  if (!have_strips()) FISH_SKIP(kNoStrips);
  ThreadPool pool(1);
  for (GgmlType t : kStripTypes) {
    const Matrix m = make_matrix(t, 512, 21, 5);
    const PreparedWeight p = prepare_strips(m.view());
    for (MatmulKernels fam : strip_families()) {
    UseKernels use(fam);
    for (int n_tok : {1, 6}) {
      const auto x = test::random_acts(512 * n_tok, 9);
      // y with ldy = n_out = 21 followed by guard values.
      std::vector<float> y(size_t(n_tok * 21 + 64), 777.0f);
      matmul(pool, p.view(), x.data(), n_tok, y.data());
      for (size_t i = size_t(n_tok * 21); i < y.size(); ++i) REQUIRE(y[i] == 777.0f);
      for (size_t i = 0; i < size_t(n_tok * 21); ++i) REQUIRE(y[i] != 777.0f);
    }
    }
  }
}

TEST_CASE("strip results do not depend on the thread count", "[matmul][prepare]") {
  if (!have_strips()) FISH_SKIP(kNoStrips);
  ThreadPool p1(1), p2(2), p3(3);
  for (GgmlType t : kStripTypes) {
    const Matrix m = make_matrix(t, 2048, 301, 17);
    const PreparedWeight p = prepare_strips(m.view(), &p2);
    for (MatmulKernels fam : strip_families()) {
    UseKernels use(fam);
    for (int n_tok : {1, 37}) {
      INFO(family_name(fam) << " " << ggml_type_name(t) << " n_tok " << n_tok);
      const auto x = test::random_acts(2048 * n_tok, 3);
      const auto a = run(p1, p.view(), x, n_tok), b = run(p2, p.view(), x, n_tok), c = run(p3, p.view(), x, n_tok);
      REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
      REQUIRE(std::memcmp(a.data(), c.data(), a.size() * 4) == 0);
    }
    }
  }
}

TEST_CASE("matmul_group over strips and GGUF rows equals separate matmuls", "[matmul][prepare]") {
  if (!have_strips()) FISH_SKIP(kNoStrips);
  ThreadPool pool(2);
  const Matrix q4 = make_matrix(GgmlType::Q4_K, 1024, 48, 1), q6 = make_matrix(GgmlType::Q6_K, 1024, 17, 2),
               q4b = make_matrix(GgmlType::Q4_K, 1024, 33, 3), q3 = make_matrix(GgmlType::Q3_K, 1024, 5, 4);
  const PreparedWeight p4 = prepare_strips(q4.view()), p6 = prepare_strips(q6.view());
  const WeightView ws[4] = {p4.view(), p6.view(), q4b.view(), q3.view()};
  std::vector<MatmulKernels> fams = strip_families();
  fams.push_back(MatmulKernels::Scalar);
  for (auto k : fams) {
    UseKernels use(k);
    for (int n_tok : {1, 13}) {
      INFO((k == MatmulKernels::Scalar ? "scalar" : family_name(k)) << " n_tok " << n_tok);
      const auto x = test::random_acts(1024 * n_tok, 99);
      std::vector<std::vector<float>> ys;
      std::vector<float*> yp;
      for (const auto& w : ws) ys.emplace_back(size_t(n_tok * w.n_out), -1.0f);
      for (auto& y : ys) yp.push_back(y.data());
      matmul_group(pool, ws, 4, x.data(), n_tok, yp.data());
      for (int i = 0; i < 4; ++i) {
        const auto y1 = run(pool, ws[i], x, n_tok);
        REQUIRE(std::memcmp(y1.data(), ys[size_t(i)].data(), y1.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("matmul_ref_f32 reads strips as their GGUF rows", "[matmul][prepare]") {
  if (!have_strips()) FISH_SKIP(kNoStrips);
  const Matrix m = make_matrix(GgmlType::Q6_K, 512, 19, 8);
  const PreparedWeight p = prepare_strips(m.view());
  const auto x = test::random_acts(512 * 2, 4);
  std::vector<float> a(2 * 19), b(2 * 19);
  matmul_ref_f32(m.view(), x.data(), 2, a.data());
  matmul_ref_f32(p.view(), x.data(), 2, b.data());
  REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

TEST_CASE("bad strip views and prepare inputs are refused with a clear error", "[matmul][prepare]") {
  ThreadPool pool(1);
  std::vector<uint8_t> buf(16 * 210 * 2);
  std::vector<float> x(512), y(64);
  auto msg = [&](WeightView w) -> std::string {
    try {
      matmul(pool, w, x.data(), 1, y.data());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(msg({GgmlType::Q3_K, buf.data(), 256, 16, 110, WeightLayout::Strips16}),
             Catch::Contains("Q3_K") && Catch::Contains("strip"));
  CHECK_THAT(msg({GgmlType::Q4_K, buf.data(), 256, 16, 160, WeightLayout::Strips16}),
             Catch::Contains("row_bytes") && Catch::Contains("exact"));
  CHECK_THAT(msg({GgmlType::Q4_K, buf.data(), 256, 16, 144, WeightLayout(7)}), Catch::Contains("layout"));
  CHECK_THAT(msg({GgmlType::Q4_K, buf.data(), 100, 16, 144, WeightLayout::Strips16}), Catch::Contains("multiple"));
  if (!have_strips()) WARN(std::string("not checked: prepare_weight's refusals (") + kNoStrips + ")");
  if (have_strips()) {
    UseKernels use(strip_families().at(0));
    auto prep_msg = [&](WeightView w) -> std::string {
      try {
        prepare_weight(w);
      } catch (const Error& e) {
        return e.what();
      }
      return "";
    };
    CHECK_THAT(prep_msg({GgmlType::Q4_K, buf.data(), 300, 2, 144}), Catch::Contains("multiple of 256"));
    CHECK_THAT(prep_msg({GgmlType::Q4_K, buf.data(), 256, 2, 100}), Catch::Contains("row_bytes"));
    CHECK_THAT(prep_msg({GgmlType::Q4_K, nullptr, 256, 2, 144}), Catch::Contains("null"));
    CHECK_THAT(prep_msg({GgmlType::Q4_K, buf.data(), 256, 2, 144, WeightLayout::Strips16}),
               Catch::Contains("already"));
    // GGUF rows with padding between them (row_bytes > the row size) repack fine.
    const Matrix m = make_matrix(GgmlType::Q4_K, 256, 3, 2);
    std::vector<uint8_t> spaced(3 * 160, 0xAB);
    for (int r = 0; r < 3; ++r) std::memcpy(spaced.data() + 160 * r, m.data.data() + 144 * r, 144);
    const PreparedWeight p = prepare_weight({GgmlType::Q4_K, spaced.data(), 256, 3, 160});
    REQUIRE(p.repacked());
    CHECK(p.view().row_bytes == 144);
    std::vector<uint8_t> row(144);
    for (int r = 0; r < 3; ++r) {
      weight_row_gguf(p.view(), r, row.data());
      CHECK(std::memcmp(row.data(), m.data.data() + 144 * r, 144) == 0);
    }
  }
  CHECK_THROWS_WITH(weight_row_gguf({GgmlType::Q4_K, buf.data(), 256, 2, 144}, 2, buf.data()),
                    Catch::Contains("row 2"));
}
