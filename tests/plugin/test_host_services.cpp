// The services the engine hands to plugins (fish_host_api).
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "backend/host_services.h"
#include "common/ggml_type.h"
#include "fish/plugin_abi.h"

using namespace fish;

TEST_CASE("host table - size version and every service present", "[plugin][host]") {
  const fish_host_api* h = backend::host_api();
  REQUIRE(h == backend::host_api());  // one table for the whole process
  CHECK(h->struct_size == sizeof(fish_host_api));
  CHECK(h->abi_version == FISH_PLUGIN_ABI_VERSION);
  CHECK(h->log);
  CHECK(h->n_threads);
  CHECK(h->parallel_for);
  CHECK(h->dequant_row);
  CHECK(h->quantize_row);
  CHECK(h->type_info);
  CHECK(h->n_threads() >= 1);
}

namespace {
struct Cover {
  std::vector<std::atomic<int>>* hits;
  std::atomic<int> bad_thread{0};
  int32_t n_threads = 0;
  bool nest = false;
};
void cover_fn(void* ctx, int64_t b, int64_t e, int32_t ith) {
  auto* c = static_cast<Cover*>(ctx);
  if (ith < 0 || ith >= c->n_threads) ++c->bad_thread;
  if (c->nest) {
    // A nested parallel_for must run (on this thread) and finish, not deadlock.
    Cover inner{c->hits, {}, c->n_threads, false};
    backend::host_api()->parallel_for(e - b, 1, [](void* p, int64_t ib, int64_t ie, int32_t t) {
      auto* in = static_cast<Cover*>(p);
      if (t != 0) ++in->bad_thread;  // nested calls run on the calling thread only
      (void)ib, (void)ie;
    }, &inner);
    c->bad_thread += inner.bad_thread.load();
  }
  for (int64_t i = b; i < e; ++i) ++(*c->hits)[size_t(i)];
}
}  // namespace

TEST_CASE("host parallel_for covers every index once and nested calls run serially", "[plugin][host]") {
  const fish_host_api* h = backend::host_api();
  for (bool nest : {false, true}) {
    const int64_t n = 10007;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    Cover c{&hits, {}, h->n_threads(), nest};
    h->parallel_for(n, 13, cover_fn, &c);
    int64_t wrong = 0;
    for (auto& x : hits) wrong += x.load() != 1;
    CHECK(wrong == 0);
    CHECK(c.bad_thread == 0);
  }
  // n <= 0 and a null function do nothing (and do not crash).
  h->parallel_for(0, 1, cover_fn, nullptr);
  h->parallel_for(10, 1, nullptr, nullptr);
}

TEST_CASE("host dequant_row and quantize_row - values and statuses", "[plugin][host]") {
  const fish_host_api* h = backend::host_api();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> src(256), back(256);
  for (auto& v : src) v = u(rng);

  // F32 is exact.
  REQUIRE(h->dequant_row(FISH_TYPE_F32, src.data(), back.data(), 256) == FISH_OK);
  CHECK(std::memcmp(src.data(), back.data(), 256 * 4) == 0);

  // Q8_0: 34-byte blocks of 32; the round trip is within half a step (max|x|/127/2 per block).
  std::vector<uint8_t> q(8 * 34);
  REQUIRE(h->quantize_row(FISH_TYPE_Q8_0, src.data(), q.data(), 256) == FISH_OK);
  REQUIRE(h->dequant_row(FISH_TYPE_Q8_0, q.data(), back.data(), 256) == FISH_OK);
  for (int b = 0; b < 8; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(src[size_t(b * 32 + i)]));
    for (int i = 0; i < 32; ++i) CHECK(std::fabs(back[size_t(b * 32 + i)] - src[size_t(b * 32 + i)]) <= amax / 127 * 0.51f + 1e-3f);
  }

  CHECK(h->dequant_row(9999, q.data(), back.data(), 256) == FISH_E_UNSUPPORTED);        // never assigned
  CHECK(h->dequant_row(uint32_t(GgmlType::IQ2_XXS), q.data(), back.data(), 256) == FISH_E_UNSUPPORTED);  // known, not decodable
  CHECK(h->dequant_row(FISH_TYPE_Q8_0, q.data(), back.data(), 100) == FISH_E_INVALID_ARGUMENT);  // not whole blocks
  CHECK(h->dequant_row(FISH_TYPE_Q8_0, nullptr, back.data(), 32) == FISH_E_INVALID_ARGUMENT);
  CHECK(h->quantize_row(FISH_TYPE_Q2_K, src.data(), q.data(), 256) == FISH_E_UNSUPPORTED);  // decode-only type
}

TEST_CASE("host type_info - geometry short structs and unknown types", "[plugin][host]") {
  const fish_host_api* h = backend::host_api();
  fish_type_info ti{};
  ti.struct_size = sizeof ti;
  REQUIRE(h->type_info(FISH_TYPE_Q4_K, &ti) == FISH_OK);
  CHECK(std::string(ti.name) == "Q4_K");
  CHECK(ti.block_size == 256);
  CHECK(ti.type_size == 144);
  CHECK(ti.can_dequant == 1);
  CHECK(ti.can_quantize == 1);
  REQUIRE(h->type_info(FISH_TYPE_Q3_K, &ti) == FISH_OK);
  CHECK(ti.can_dequant == 1);
  CHECK(ti.can_quantize == 0);

  // A caller built against a shorter struct: nothing is written past its struct_size.
  std::vector<uint8_t> buf(sizeof(fish_type_info) + 16, 0xA5);
  const uint32_t short_size = uint32_t(offsetof(fish_type_info, block_size));
  std::memset(buf.data(), 0, short_size);
  std::memcpy(buf.data(), &short_size, 4);
  REQUIRE(h->type_info(FISH_TYPE_Q8_0, reinterpret_cast<fish_type_info*>(buf.data())) == FISH_OK);
  for (size_t i = short_size; i < buf.size(); ++i) REQUIRE(buf[i] == 0xA5);
  fish_type_info got{};
  std::memcpy(&got, buf.data(), short_size);
  CHECK(std::string(got.name) == "Q8_0");

  CHECK(h->type_info(9999, &ti) == FISH_E_UNSUPPORTED);
  CHECK(h->type_info(FISH_TYPE_F32, nullptr) == FISH_E_INVALID_ARGUMENT);
}

TEST_CASE("host services - FQ3 (ABI 2.1) and Q4_K, the re-quantisation targets", "[plugin][host]") {
  // A plugin that decodes through the host (the reference plugin) supports
  // FQ3 by asking type_info; one with its own kernels needs FQ3's geometry.
  const fish_host_api* h = backend::host_api();
  fish_type_info ti{};
  ti.struct_size = sizeof ti;
  REQUIRE(h->type_info(FISH_TYPE_FQ3, &ti) == FISH_OK);
  CHECK(std::string(ti.name) == "FQ3");
  CHECK((ti.block_size == 256 && ti.type_size == 112 && ti.can_dequant == 1 && ti.can_quantize == 1));

  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> src(512), back(512);
  for (auto& v : src) v = nd(rng);
  for (uint32_t t : {uint32_t(FISH_TYPE_FQ3), uint32_t(FISH_TYPE_Q4_K)}) {
    std::vector<uint8_t> q(t == FISH_TYPE_FQ3 ? 2 * 112 : 2 * 144);
    REQUIRE(h->quantize_row(t, src.data(), q.data(), 512) == FISH_OK);
    REQUIRE(h->dequant_row(t, q.data(), back.data(), 512) == FISH_OK);
    double num = 0, den = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      num += double(src[i] - back[i]) * double(src[i] - back[i]);
      den += double(src[i]) * double(src[i]);
    }
    // Gaussian data: FQ3 ~12%, Q4_K ~7% relative RMS.
    CHECK(std::sqrt(num / den) < (t == FISH_TYPE_FQ3 ? 0.15 : 0.08));
  }
  CHECK(h->dequant_row(FISH_TYPE_FQ3, back.data(), back.data(), 100) == FISH_E_INVALID_ARGUMENT);
}

TEST_CASE("host log reaches the hook with level and source", "[plugin][host]") {
  std::vector<std::string> lines;
  backend::set_log_hook([&](int level, const std::string& src, const std::string& msg) {
    lines.push_back(std::to_string(level) + "|" + src + "|" + msg);
  });
  backend::host_api()->log(FISH_LOG_WARN, "vulkan", "heap nearly full");
  backend::host_api()->log(FISH_LOG_DEBUG, nullptr, nullptr);  // tolerated
  backend::set_log_hook({});
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "1|vulkan|heap nearly full");
  CHECK(lines[1] == "3|plugin|");
}
