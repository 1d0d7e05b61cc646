// CPU matmul kernels: every family against the scalar one, the scalar one
// against ggml's reference dot (quant/vec_dot_ref) and against the f32
// reference product, group ≡ separate calls, thread count invariance, errors.
//
// Bounds used below (M = Σ_i |ŵ_i| |x_i|, ŵ the dequantised weights):
//  * SIMD vs scalar, quantised types: both families quantise the activations to
//    the same int8 values and scales (checked bit for bit) and form the same
//    exact integer block sums; they differ only in the order of the f32 scale
//    products and sums (and the SIMD kernels add the min / offset terms as a
//    separate f32 sum whose parts can each be a few times |ŵ||x|). Allowed:
//    |Δ| <= 5e-5 · M  (f32 rounding, ~2^-24 per op, over <= a few hundred
//    terms; one misplaced quant moves y by ~M / n_in, i.e. >= 1e-4 · M here).
//  * float types (f32 activations, no quantisation): |Δ| <= (n_in / 8 + 16) · 2^-24 · M
//    (a lane of 8 or 16 sums at most n_in / 8 products in sequence).
//  * scalar family vs vec_dot_ref: the scalar family calls it per (row, token)
//    on quantize_row's activations, so the driver's plumbing must give equal bits.
//  * scalar vs matmul_ref_f32 (exact product with f32 activations): the only
//    difference is the activation quantisation x -> x̂ (and for Q8_1, its
//    f16-rounded block sum s), so by the triangle inequality
//      |Δ| <= Σ_i |ŵ_i| |x_i - x̂_i| + Σ_b |m_b| |s_b - d_b Σ q| + 1e-5 · M,
//    computed from the actual quantised activations; the test also checks that
//    this bound is small (<= 5% of M), so it cannot pass vacuously.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/fp16.h"
#include "cpu/matmul.h"
#include "cpu/matmul_kernels.h"
#include "cpu/thread_pool.h"
#include "matmul_test_data.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test_skip.h"

using namespace fish;

// Heap allocations made while g_count_allocs is set (all threads): the global
// operator new of this test binary counts, then defers to malloc. Default
// visibility (the build hides symbols): the replacement must be the one the
// shared libraries (libstdc++, a sanitizer runtime) see too.
#define FISH_TEST_EXPORT __attribute__((visibility("default")))
static std::atomic<bool> g_count_allocs{false};
static std::atomic<long> g_allocs{0};
namespace {
void* counted_malloc(std::size_t n) {
  if (g_count_allocs.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  return std::malloc(n ? n : 1);
}
}  // namespace
// Every unaligned form, so that no allocation goes through another
// allocator's operator new and comes back through free() (sanitizers check).
FISH_TEST_EXPORT void* operator new(std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
FISH_TEST_EXPORT void* operator new[](std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
FISH_TEST_EXPORT void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
FISH_TEST_EXPORT void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
// GCC pairs free() with the replaced operator new and warns (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
FISH_TEST_EXPORT void operator delete(void* p) noexcept { std::free(p); }
FISH_TEST_EXPORT void operator delete(void* p, std::size_t) noexcept { std::free(p); }
FISH_TEST_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
FISH_TEST_EXPORT void operator delete[](void* p) noexcept { std::free(p); }
FISH_TEST_EXPORT void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
FISH_TEST_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

const GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                              GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }
int block_of(GgmlType t) { return ggml_type_info(t)->block_size; }

// A test matrix with its dequantised rows.
struct Matrix {
  GgmlType type;
  int64_t n_in, n_out;
  std::vector<uint8_t> data;
  std::vector<float> deq;  // [n_out, n_in]
  WeightView view() const { return {type, data.data(), n_in, n_out, test::row_bytes_of(type, n_in)}; }
};

Matrix make_matrix(GgmlType t, int64_t n_in, int64_t n_out, uint64_t seed) {
  Matrix m{t, n_in, n_out, test::random_weights(t, n_in, n_out, seed), {}};
  m.deq.resize(size_t(n_in * n_out));
  const uint64_t rb = test::row_bytes_of(t, n_in);
  for (int64_t r = 0; r < n_out; ++r) dequant_row(t, m.data.data() + rb * uint64_t(r), m.deq.data() + r * n_in, n_in);
  return m;
}

// M[t * n_out + r] = Σ_i |ŵ_ri| |x_ti|
std::vector<double> magnitudes(const Matrix& m, const std::vector<float>& x, int n_tok) {
  std::vector<double> M(size_t(n_tok * m.n_out));
  for (int t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < m.n_out; ++r) {
      double s = 0;
      for (int64_t i = 0; i < m.n_in; ++i) s += std::fabs(double(m.deq[size_t(r * m.n_in + i)]) * x[size_t(t * m.n_in + i)]);
      M[size_t(t * m.n_out + r)] = s;
    }
  return M;
}

std::vector<float> run(ThreadPool& pool, const Matrix& m, const std::vector<float>& x, int n_tok) {
  std::vector<float> y(size_t(n_tok * m.n_out), -12345.0f);
  matmul(pool, m.view(), x.data(), n_tok, y.data());
  return y;
}

// The SIMD families this CPU runs; a missing one is a part of the case not run (WARN).
std::vector<MatmulKernels> simd_families() {
  std::vector<MatmulKernels> out;
  for (auto [k, name] : {std::pair{MatmulKernels::Avx2, "avx2"}, std::pair{MatmulKernels::AvxVnni, "avxvnni"},
                         std::pair{MatmulKernels::Avx512, "avx512"}}) {
    if (matmul_kernels_supported(k)) out.push_back(k);
    else WARN("not run: the " << name << " kernels (this CPU lacks the instructions)");
  }
  return out;
}
constexpr const char* kNoSimd = "this CPU has neither the AVX2 nor the AVX-512 kernels";

const char* family_label(MatmulKernels k) {
  return k == MatmulKernels::Scalar ? "scalar" : k == MatmulKernels::Avx2 ? "avx2" : k == MatmulKernels::AvxVnni ? "avxvnni" : "avx512";
}

// Restores the default family when a test section ends.
struct UseKernels {
  explicit UseKernels(MatmulKernels k) { matmul_use_kernels(k); }
  ~UseKernels() { matmul_use_default_kernels(); }
};

}  // namespace

TEST_CASE("SIMD activation quantisers produce ggml's Q8 values bit for bit", "[matmul]") {
  const int64_t n = 1024;
  std::vector<float> x = test::random_acts(n, 7);
  // Block 1 (of 32 and of 256): exact ties after scaling (amax 127 -> d = 1,
  // and the largest magnitude negative -> iscale = 1); block 2 all zeros.
  for (int i = 0; i < 32; ++i) x[size_t(256 + i)] = float(i % 7) - 3.5f;
  x[256] = -127.0f;
  for (int i = 0; i < 256; ++i) x[size_t(512 + i)] = 0.0f;
  const std::vector<MatmulKernels> fams = simd_families();
  if (fams.empty()) FISH_SKIP(kNoSimd);
  for (auto k : fams) {
    INFO("family " << family_label(k));
    const mm::KernelFamily* fam = k == MatmulKernels::Avx2      ? mm::family_avx2()
                                  : k == MatmulKernels::AvxVnni ? mm::family_avxvnni()
                                                                : mm::family_avx512();
    REQUIRE(fam);
    REQUIRE(fam->quantize);
    {  // X8_K vs Q8_K
      std::vector<uint8_t> simd(mm::act_row_bytes(mm::ActLayout::X8_K, n));
      std::vector<BlockQ8_K> ref(size_t(n / QK_K));
      fam->quantize(mm::ActLayout::X8_K, x.data(), n, simd.data());
      quantize_row(GgmlType::Q8_K, x.data(), ref.data(), n);
      const auto planes = mm::x8_k_planes(n);
      for (int64_t b = 0; b < n / QK_K; ++b) {
        REQUIRE(std::memcmp(simd.data() + b * QK_K, ref[size_t(b)].qs, QK_K) == 0);
        float d;
        std::memcpy(&d, simd.data() + planes.d + 4 * b, 4);
        REQUIRE(d == ref[size_t(b)].d);
        for (int g = 0; g < 16; ++g) {
          float sf;
          std::memcpy(&sf, simd.data() + planes.sf + 4 * (16 * b + g), 4);
          REQUIRE(sf == ref[size_t(b)].d * float(ref[size_t(b)].bsums[g]));
        }
      }
    }
    for (bool s : {false, true}) {  // X8_32 vs Q8_0, X8_32S vs Q8_1
      const auto layout = s ? mm::ActLayout::X8_32S : mm::ActLayout::X8_32;
      std::vector<uint8_t> simd(mm::act_row_bytes(layout, n));
      fam->quantize(layout, x.data(), n, simd.data());
      std::vector<BlockQ8_0> r0(size_t(n / 32));
      std::vector<BlockQ8_1> r1(size_t(n / 32));
      quantize_row(GgmlType::Q8_0, x.data(), r0.data(), n);
      quantize_row(GgmlType::Q8_1, x.data(), r1.data(), n);
      const auto planes = mm::x8_32_planes(n);
      for (int64_t b = 0; b < n / 32; ++b) {
        REQUIRE(std::memcmp(simd.data() + 32 * b, r0[size_t(b)].qs, 32) == 0);
        REQUIRE(std::memcmp(simd.data() + 32 * b, r1[size_t(b)].qs, 32) == 0);
        float dx[8], sa;
        std::memcpy(dx, simd.data() + planes.dx + 32 * b, 32);
        std::memcpy(&sa, simd.data() + planes.sa + 4 * b, 4);
        for (float v : dx) REQUIRE(v == fp16_to_fp32(r0[size_t(b)].d));
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += r0[size_t(b)].qs[j];
        int32_t bs = 0;  // the strips' exact offset term
        std::memcpy(&bs, simd.data() + planes.bs + 4 * b, 4);
        REQUIRE(bs == sum);
        if (s) REQUIRE(sa == fp16_to_fp32(r1[size_t(b)].s));
        else REQUIRE(sa == fp16_to_fp32(r0[size_t(b)].d) * float(sum));
      }
    }
  }
}

TEST_CASE("scalar family equals vec_dot_ref on every row and token", "[matmul]") {
  ThreadPool pool(2);
  UseKernels use(MatmulKernels::Scalar);
  for (GgmlType t : kAllTypes) {
    if (is_float(t)) continue;  // vec_dot_ref takes f16/bf16 activations there; fish keeps f32
    const int64_t n_in = block_of(t) == 32 ? 96 : 512;
    const int n_tok = 3;
    INFO("type " << ggml_type_name(t));
    const Matrix m = make_matrix(t, n_in, 7, 11 + uint64_t(t));
    const auto x = test::random_acts(n_in * n_tok, 5);
    const auto y = run(pool, m, x, n_tok);
    const GgmlType at = vec_dot_type(t);
    std::vector<uint8_t> act(*ggml_row_bytes(uint32_t(at), n_in));
    for (int tk = 0; tk < n_tok; ++tk) {
      quantize_row(at, x.data() + tk * n_in, act.data(), n_in);
      for (int64_t r = 0; r < m.n_out; ++r) {
        const float ref = vec_dot_ref(t, n_in, m.data.data() + uint64_t(r) * m.view().row_bytes, act.data());
        REQUIRE(y[size_t(tk * m.n_out + r)] == ref);
      }
    }
  }
}

TEST_CASE("scalar kernels vs matmul_ref_f32 within the activation quantisation bound", "[matmul]") {
  ThreadPool pool(1);
  UseKernels use(MatmulKernels::Scalar);
  for (GgmlType t : kAllTypes) {
    const int64_t n_in = is_float(t) ? 172 : block_of(t) == 32 ? 160 : 768;
    const int n_tok = 5;
    INFO("type " << ggml_type_name(t));
    const Matrix m = make_matrix(t, n_in, 9, 100 + uint64_t(t));
    const auto x = test::random_acts(n_in * n_tok, 6);
    const auto y = run(pool, m, x, n_tok);
    std::vector<float> yr(y.size());
    matmul_ref_f32(m.view(), x.data(), n_tok, yr.data());
    const auto M = magnitudes(m, x, n_tok);
    const GgmlType at = vec_dot_type(t);
    std::vector<uint8_t> act(*ggml_row_bytes(uint32_t(at), n_in));
    std::vector<float> xq(static_cast<size_t>(n_in));
    for (int tk = 0; tk < n_tok; ++tk) {
      const float* xt = x.data() + tk * n_in;
      if (!is_float(t)) {
        quantize_row(at, xt, act.data(), n_in);
        dequant_row(at, act.data(), xq.data(), n_in);
      }
      for (int64_t r = 0; r < m.n_out; ++r) {
        const size_t o = size_t(tk * m.n_out + r);
        double bound = 1e-5 * M[o];
        if (is_float(t)) {
          bound = (double(n_in) / 8 + 16) * std::ldexp(1.0, -24) * M[o];
        } else {
          double qerr = 0;
          for (int64_t i = 0; i < n_in; ++i)
            qerr += std::fabs(double(m.deq[size_t(r * n_in + i)])) * std::fabs(double(xt[i]) - xq[size_t(i)]);
          if (at == GgmlType::Q8_1) {  // the m · s term uses s = f16(d Σ q)
            const auto* a1 = reinterpret_cast<const BlockQ8_1*>(act.data());
            const uint8_t* wr = m.data.data() + uint64_t(r) * m.view().row_bytes;
            for (int64_t b = 0; b < n_in / 32; ++b) {
              uint16_t mh;
              std::memcpy(&mh, wr + b * ggml_type_info(t)->type_size + 2, 2);  // m follows d
              int sum = 0;
              for (int j = 0; j < 32; ++j) sum += a1[b].qs[j];
              qerr += std::fabs(double(fp16_to_fp32(mh))) *
                      std::fabs(double(fp16_to_fp32(a1[b].s)) - double(fp16_to_fp32(a1[b].d)) * sum);
            }
          }
          REQUIRE(qerr <= 0.05 * M[o]);
          bound += qerr;
        }
        REQUIRE(std::fabs(double(y[o]) - double(yr[o])) <= bound);
      }
    }
  }
}

TEST_CASE("SIMD kernel families equal the scalar family", "[matmul]") {
  ThreadPool pool(2);
  const int tok_counts[] = {1, 2, 3, 5, 8, 13, 37};
  const std::vector<MatmulKernels> fams = simd_families();
  if (fams.empty()) FISH_SKIP(kNoSimd);
  for (auto k : fams) {
    for (GgmlType t : kAllTypes) {
      const int bs = block_of(t);
      // Row lengths: one block, a few blocks (odd counts: partial SIMD groups),
      // a model-sized row; float rows of any length.
      // Rows past ~3000 elements are split in K chunks when there are many
      // tokens (later chunks add to y): 4608 and 8192 cover that path.
      std::vector<int64_t> n_ins = bs == 1 ? std::vector<int64_t>{1, 15, 64, 172, 2048, 4100}
                                   : bs == 32 ? std::vector<int64_t>{32, 96, 160, 288, 2048, 8192}
                                              : std::vector<int64_t>{256, 768, 2048, 4608};
      for (int64_t n_in : n_ins) {
        for (int64_t n_out : {int64_t(1), int64_t(7), int64_t(33)}) {
          const Matrix m = make_matrix(t, n_in, n_out, uint64_t(n_in * 131 + n_out) ^ uint64_t(t));
          const auto x = test::random_acts(n_in * 37, uint64_t(n_in + n_out));
          const auto M = magnitudes(m, x, 37);
          std::vector<float> ys;
          {
            UseKernels use(MatmulKernels::Scalar);
            ys = run(pool, m, x, 37);
          }
          UseKernels use(k);
          for (int n_tok : tok_counts) {
            INFO(family_label(k) << " " << ggml_type_name(t) << " n_in " << n_in << " n_out " << n_out << " n_tok "
                                 << n_tok);
            const auto y = run(pool, m, x, n_tok);
            // y of the first n_tok tokens must equal the scalar rows (tokens are independent).
            for (int tk = 0; tk < n_tok; ++tk)
              for (int64_t r = 0; r < n_out; ++r) {
                const size_t o = size_t(tk * n_out + r);
                const double bound =
                    is_float(t) ? (double(n_in) / 8 + 16) * std::ldexp(1.0, -24) * M[o] : 5e-5 * M[o];
                if (!(std::fabs(double(y[o]) - double(ys[o])) <= bound)) {
                  INFO("token " << tk << " row " << r << " simd " << y[o] << " scalar " << ys[o] << " M " << M[o]);
                  REQUIRE(std::fabs(double(y[o]) - double(ys[o])) <= bound);
                }
              }
          }
        }
      }
    }
  }
}

TEST_CASE("matmul_group equals separate matmuls, bit for bit", "[matmul]") {
  ThreadPool pool(2);
  std::vector<MatmulKernels> fams = simd_families();
  fams.push_back(MatmulKernels::Scalar);
  // Mixed types sharing one input: K-quants of three kinds, a float pair, and
  // 32-block types that need two activation layouts (Q8_0-like and Q8_1-like).
  struct Group {
    std::vector<Matrix> ms;
    int64_t n_in;
  };
  std::vector<Group> groups;
  groups.push_back({{make_matrix(GgmlType::Q4_K, 512, 33, 1), make_matrix(GgmlType::Q6_K, 512, 17, 2),
                     make_matrix(GgmlType::Q3_K, 512, 5, 3), make_matrix(GgmlType::Q4_K, 512, 64, 4)},
                    512});
  groups.push_back({{make_matrix(GgmlType::F16, 172, 31, 5), make_matrix(GgmlType::F32, 172, 64, 6)}, 172});
  groups.push_back({{make_matrix(GgmlType::Q8_0, 96, 40, 7), make_matrix(GgmlType::Q4_1, 96, 3, 8),
                     make_matrix(GgmlType::Q5_0, 96, 21, 9)},
                    96});
  for (auto k : fams) {
    UseKernels use(k);
    for (const Group& g : groups) {
      for (int n_tok : {1, 13}) {
        INFO(family_label(k) << " n_in " << g.n_in << " n_tok " << n_tok);
        const auto x = test::random_acts(g.n_in * n_tok, 99);
        std::vector<WeightView> ws;
        std::vector<std::vector<float>> ys;
        std::vector<float*> yp;
        for (const auto& m : g.ms) {
          ws.push_back(m.view());
          ys.emplace_back(size_t(n_tok * m.n_out), -1.0f);
        }
        for (auto& y : ys) yp.push_back(y.data());
        matmul_group(pool, ws.data(), int(ws.size()), x.data(), n_tok, yp.data());
        for (size_t i = 0; i < g.ms.size(); ++i) {
          const auto y1 = run(pool, g.ms[i], x, n_tok);
          REQUIRE(std::memcmp(y1.data(), ys[i].data(), y1.size() * 4) == 0);
        }
      }
    }
  }
}

TEST_CASE("results do not depend on the thread count", "[matmul]") {
  ThreadPool p1(1), p2(2), p3(3);
  std::vector<MatmulKernels> fams = simd_families();
  fams.push_back(MatmulKernels::Scalar);
  for (auto k : fams) {
    UseKernels use(k);
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F16}) {
      INFO(family_label(k) << " " << ggml_type_name(t));
      const Matrix m = make_matrix(t, 512, 301, 17);
      for (int n_tok : {1, 37}) {
        const auto x = test::random_acts(512 * n_tok, 3);
        const auto a = run(p1, m, x, n_tok), b = run(p2, m, x, n_tok), c = run(p3, m, x, n_tok);
        REQUIRE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
        REQUIRE(std::memcmp(a.data(), c.data(), a.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("no heap allocation per call once the scratch has grown", "[matmul]") {
  ThreadPool pool(2);
  const Matrix q4 = make_matrix(GgmlType::Q4_K, 2048, 512, 1), q6 = make_matrix(GgmlType::Q6_K, 2048, 256, 2);
  const auto x = test::random_acts(2048 * 64, 3);
  std::vector<float> y1(64 * 512), y2(64 * 256);
  const WeightView ws[2] = {q4.view(), q6.view()};
  float* ys[2] = {y1.data(), y2.data()};
  for (int n_tok : {64, 1}) {  // the largest first: the scratch grows once
    matmul_group(pool, ws, 2, x.data(), n_tok, ys);
    g_allocs = 0;
    g_count_allocs = true;
    for (int rep = 0; rep < 20; ++rep) {
      matmul(pool, ws[0], x.data(), n_tok, y1.data());
      matmul_group(pool, ws, 2, x.data(), n_tok, ys);
    }
    g_count_allocs = false;
    INFO("n_tok " << n_tok);
    CHECK(g_allocs.load() == 0);
  }
}

TEST_CASE("bad weights are refused with a clear error", "[matmul]") {
  ThreadPool pool(1);
  std::vector<uint8_t> buf(4096);
  std::vector<float> x(256), y(16);
  auto msg = [&](WeightView w) -> std::string {
    try {
      matmul(pool, w, x.data(), 1, y.data());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(msg({GgmlType::IQ2_XXS, buf.data(), 256, 1, 66}), Catch::Contains("IQ2_XXS") && Catch::Contains("not supported"));
  CHECK_THAT(msg({GgmlType::Q4_K, buf.data(), 100, 1, 144}), Catch::Contains("not a multiple") && Catch::Contains("256"));
  CHECK_THAT(msg({GgmlType::Q4_K, buf.data(), 256, 1, 100}), Catch::Contains("row_bytes"));
  CHECK_THAT(msg({GgmlType::Q8_0, nullptr, 32, 2, 34}), Catch::Contains("null"));
  CHECK_THAT(msg({GgmlType::F32, buf.data(), 0, 2, 0}), Catch::Contains("shape"));
  // matmul_group with different input lengths
  WeightView ws[2] = {{GgmlType::F32, buf.data(), 16, 1, 64}, {GgmlType::F32, buf.data(), 32, 1, 128}};
  float* ys[2] = {y.data(), y.data()};
  CHECK_THROWS_WITH(matmul_group(pool, ws, 2, x.data(), 1, ys), Catch::Contains("n_in"));
  // Empty calls are fine.
  CHECK_NOTHROW(matmul(pool, {GgmlType::Q4_K, buf.data(), 256, 0, 144}, x.data(), 1, y.data()));
  CHECK_NOTHROW(matmul(pool, {GgmlType::Q4_K, buf.data(), 256, 1, 144}, x.data(), 0, y.data()));
}

TEST_CASE("kernel family name and override", "[matmul]") {
  const std::string name = matmul_kernel_name();
  INFO("default family: " << name);
  CHECK((name == "scalar" || name == "avx2" || name == "avx2-vnni" || name == "avx512-vnni"));
  std::printf("matmul kernels on this CPU: %s\n", name.c_str());
  {
    UseKernels use(MatmulKernels::Scalar);
    CHECK(std::string(matmul_kernel_name()) == "scalar");
  }
  CHECK(std::string(matmul_kernel_name()) == name);
  for (auto k : {MatmulKernels::Avx2, MatmulKernels::AvxVnni, MatmulKernels::Avx512})
    if (!matmul_kernels_supported(k)) CHECK_THROWS_AS(matmul_use_kernels(k), Error);
}
