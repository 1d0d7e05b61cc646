// fish quantize: stories260K -> Q8_0 and TinyStories-656K-Q8_0 -> Q4_0 give
// valid files whose weights are within the type's error bound of the input,
// with all metadata copied; the Q4_K_M mix of a re-quantised synth-tiny matches
// the types llama.cpp chose for it, its Q5_K_M and Q6_K mixes follow the same
// rule with less error; bad requests fail cleanly.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "common/error.h"
#include "convert/quantize_model.h"
#include "convert/synth.h"
#include "convert_test_util.h"
#include "gguf/gguf_file.h"
#include "test_paths.h"

using namespace fish;
using namespace fish::convert;

namespace {

struct Run {
  std::string out;
  std::vector<std::string> notes;
  QuantizeSummary sum;
};

Run quantize(const test::ScratchDir& dir, const std::string& in, const std::string& type, int threads = 2) {
  Run r;
  r.out = dir.file(type + "-" + std::to_string(threads) + ".gguf");
  r.sum = quantize_model(in, r.out, type, threads, [&](const std::string& m) { r.notes.push_back(m); });
  return r;
}

// Every key of `in` is in `out` with an identical value, apart from the ones listed.
void check_metadata_copied(const gguf::File& in, const gguf::File& out) {
  for (auto& kv : in.kvs()) {
    if (kv.key == "general.file_type") continue;
    INFO("key " << kv.key);
    const gguf::Value* v = out.find(kv.key);
    REQUIRE(v);
    REQUIRE(v->type == kv.value.type);
    if (v->type == gguf::ValueType::STRING) CHECK(v->str == kv.value.str);
    else if (v->type == gguf::ValueType::ARRAY) {
      REQUIRE(v->arr->size == kv.value.arr->size);
      if (v->arr->type == gguf::ValueType::STRING) CHECK(v->arr->strings == kv.value.arr->strings);
      else CHECK(std::memcmp(v->arr->data, kv.value.arr->data, v->arr->size * gguf::value_type_size(v->arr->type)) == 0);
    } else {
      CHECK(v->u == kv.value.u);
      CHECK(std::memcmp(&v->f, &kv.value.f, sizeof v->f) == 0);
    }
  }
}

// Largest |a - b| in each block of `block` elements, compared with bound(amax of a's block).
template <class Bound>
void check_block_error(const std::vector<float>& a, const std::vector<float>& b, int block, Bound bound,
                       double* rel_rms) {
  REQUIRE(a.size() == b.size());
  double err2 = 0, ref2 = 0;
  size_t bad = 0;
  for (size_t s = 0; s < a.size(); s += size_t(block)) {
    float amax = 0;
    for (int j = 0; j < block; ++j) amax = std::max(amax, std::abs(a[s + size_t(j)]));
    const double lim = bound(amax);
    for (int j = 0; j < block; ++j) {
      const double e = double(a[s + size_t(j)]) - b[s + size_t(j)];
      err2 += e * e;
      ref2 += double(a[s + size_t(j)]) * a[s + size_t(j)];
      if (std::abs(e) > lim) ++bad;
    }
  }
  CHECK(bad == 0);
  *rel_rms = std::sqrt(err2 / ref2);
}

}  // namespace

TEST_CASE("quantize: stories260K to Q8_0", "[convert][quantize]") {
  test::ScratchDir dir("quant_q8");
  const std::string in_path = test::model_path("stories260K.gguf");
  const Run r = quantize(dir, in_path, "Q8_0");
  auto in = gguf::File::open(in_path);
  auto out = gguf::File::open(r.out);

  check_metadata_copied(*in, *out);
  CHECK(*out->get_u32("general.file_type") == 7);
  CHECK(*out->get_u32("general.quantization_version") == 2);
  CHECK(out->kvs().size() == in->kvs().size() + 2);  // stories260K had neither key

  // The five 172-wide ffn_down matrices cannot be Q8_0 blocks: kept F32, reported.
  REQUIRE(r.notes.size() == 5);
  for (int l = 0; l < 5; ++l) {
    CHECK_THAT(r.notes[size_t(l)], Catch::StartsWith("blk." + std::to_string(l) + ".ffn_down.weight: ") &&
                                       Catch::Contains("172") && Catch::Contains("kept as F32"));
  }
  CHECK(r.sum.n_requantized == 2 + 5 * 6);
  CHECK(r.sum.n_copied == 1 + 5 * 3);

  REQUIRE(out->tensors().size() == in->tensors().size());
  double worst = 0;
  for (auto& t : in->tensors()) {
    INFO("tensor " << t.name);
    const gguf::TensorInfo* q = out->tensor(t.name);
    REQUIRE(q);
    CHECK(std::equal(t.ne, t.ne + 4, q->ne));
    const bool keep = t.n_dims == 1 || t.ne[0] == 172;
    CHECK(q->type == (keep ? GgmlType::F32 : GgmlType::Q8_0));
    if (keep) {
      REQUIRE(q->nbytes == t.nbytes);
      CHECK(std::memcmp(q->data, t.data, t.nbytes) == 0);
      continue;
    }
    // Q8_0: q = round(x / d), d = amax / 127 stored as f16, so |error| <= d/2 plus
    // 127 * d * 2^-11 from the f16 scale: under 0.57 * amax / 127.
    double rel = 0;
    check_block_error(test::tensor_f32(t), test::tensor_f32(*q), 32,
                      [](float amax) { return 0.57 * amax / 127 + 1e-9; }, &rel);
    CHECK(rel < 0.01);
    worst = std::max(worst, rel);
  }
  INFO("worst relative RMS error " << worst);
  CHECK(worst > 0);
}

TEST_CASE("quantize: TinyStories-656K Q8_0 to Q4_0", "[convert][quantize]") {
  test::ScratchDir dir("quant_q4");
  const std::string in_path = test::model_path("TinyStories-656K-Q8_0.gguf");
  const Run r = quantize(dir, in_path, "Q4_0");
  CHECK(r.notes.empty());
  auto in = gguf::File::open(in_path);
  auto out = gguf::File::open(r.out);
  check_metadata_copied(*in, *out);
  CHECK(*out->get_u32("general.file_type") == 2);
  CHECK(out->kvs().size() == in->kvs().size());
  CHECK(out->tensor("output.weight") == nullptr);  // still tied

  REQUIRE(out->tensors().size() == 20);
  for (auto& t : in->tensors()) {
    INFO("tensor " << t.name);
    const gguf::TensorInfo* q = out->tensor(t.name);
    REQUIRE(q);
    CHECK(std::equal(t.ne, t.ne + 4, q->ne));
    if (t.n_dims == 1) {
      CHECK(q->type == GgmlType::F32);
      CHECK(std::memcmp(q->data, t.data, t.nbytes) == 0);
      continue;
    }
    CHECK(q->type == GgmlType::Q4_0);
    // Q4_0: d = m / -8 with m the element of largest magnitude, q = round(x/d) + 8
    // clamped to [0, 15]: |error| <= |d|/2, except -m itself, which clamps to 7|d|
    // away: |error| <= amax / 8 (plus the f16 rounding of d).
    double rel = 0;
    check_block_error(test::tensor_f32(t), test::tensor_f32(*q), 32,
                      [](float amax) { return amax / 8 * 1.01 + 1e-9; }, &rel);
    CHECK(rel < 0.15);
  }
  // Against llama.cpp's own Q4_0 of these weights, where llama.cpp also chose
  // Q4_0 (it keeps the tied token_embd at Q8_0, an output-tensor rule fish's
  // plain Q4_0 format does not have).
  auto ref = gguf::File::open(test::model_path("TinyStories-656K-Q4_0.gguf"));
  int compared = 0, identical = 0;
  for (auto& t : in->tensors()) {
    if (t.n_dims == 1 || ref->tensor(t.name)->type != GgmlType::Q4_0) continue;
    ++compared;
    identical += std::memcmp(out->tensor(t.name)->data, ref->tensor(t.name)->data, t.nbytes / 34 * 18) == 0;
    const auto src = test::tensor_f32(t), ours = test::tensor_f32(*out->tensor(t.name)),
               theirs = test::tensor_f32(*ref->tensor(t.name));
    double e_ours = 0, e_theirs = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      e_ours += double(src[i] - ours[i]) * (src[i] - ours[i]);
      e_theirs += double(src[i] - theirs[i]) * (src[i] - theirs[i]);
    }
    INFO(t.name << ": squared error ours " << e_ours << ", llama.cpp's " << e_theirs);
    CHECK(e_ours <= e_theirs * 1.05);
  }
  CHECK(compared == 14);
  // llama.cpp made its Q4_0 from the same Q8_0 weights with the same (reference)
  // rounding, so the blocks come out bit for bit the same.
  CHECK(identical == compared);
}

TEST_CASE("quantize: Q4_K_M re-creates llama.cpp's mix of synth-tiny", "[convert][quantize]") {
  // synth-tiny-Q4_K_M.gguf was made by llama-quantize: take it to Q8_0 and back to
  // Q4_K_M; every tensor must get the type llama.cpp gave it.
  test::ScratchDir dir("quant_mix");
  const std::string ref_path = test::model_path("synth-tiny-Q4_K_M.gguf");
  const Run q8 = quantize(dir, ref_path, "Q8_0", 1);
  const Run q4 = quantize(dir, q8.out, "Q4_K_M", 2);
  CHECK(q4.notes.empty());
  auto ref = gguf::File::open(ref_path);
  auto mid = gguf::File::open(q8.out);
  auto out = gguf::File::open(q4.out);
  CHECK(*out->get_u32("general.file_type") == 15);
  REQUIRE(out->tensors().size() == ref->tensors().size());
  for (auto& t : ref->tensors()) {
    INFO("tensor " << t.name);
    CHECK(mid->tensor(t.name)->type == (t.n_dims == 1 ? GgmlType::F32 : GgmlType::Q8_0));
    CHECK(out->tensor(t.name)->type == t.type);
    if (t.n_dims == 1) continue;
    // Q4_K / Q6_K data -> Q8_0 -> the same type: close to where it started.
    const auto a = test::tensor_f32(t), b = test::tensor_f32(*out->tensor(t.name));
    double e = 0, s = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      e += double(a[i] - b[i]) * (a[i] - b[i]);
      s += double(a[i]) * a[i];
    }
    CHECK(std::sqrt(e / s) < (t.type == GgmlType::Q6_K ? 0.02 : 0.05));
  }
}

TEST_CASE("quantize: Q5_K_M and Q6_K mixes, each finer than the one below", "[convert][quantize]") {
  // A synthesised tiny Llama in F32 (rows of 256 and 768: every K-quant fits)
  // to Q4_K_M, Q5_K_M and Q6_K. Q5_K_M must put Q6_K where Q4_K_M does (the
  // same more-bits rule; test "Q4_K_M re-creates llama.cpp's mix" holds that
  // one) and Q5_K elsewhere; Q6_K every matrix. Per tensor, the relative RMS
  // error against the F32 values must fall from Q4_K to Q5_K to Q6_K (a type
  // written but quantised as another would not). fish synth --type Q5_K_M
  // chooses the same types.
  test::ScratchDir dir("quant_mix56");
  SynthOptions o;
  o.shape = "tiny", o.type = "F32", o.out = dir.file("tiny-F32.gguf"), o.seed = 3, o.n_threads = 2;
  synth_model(o);
  const Run q4 = quantize(dir, o.out, "Q4_K_M", 2), q5 = quantize(dir, o.out, "Q5_K_M", 2);
  const Run q6 = quantize(dir, o.out, "Q6_K", 2);
  CHECK(q5.notes.empty());
  CHECK(q6.notes.empty());
  SynthOptions s5 = o;
  s5.type = "Q5_K_M", s5.out = dir.file("tiny-Q5_K_M.gguf");
  synth_model(s5);
  auto src = gguf::File::open(o.out), syn5 = gguf::File::open(s5.out);
  auto f4 = gguf::File::open(q4.out), f5 = gguf::File::open(q5.out), f6 = gguf::File::open(q6.out);
  CHECK(*f5->get_u32("general.file_type") == 17);
  CHECK(*f6->get_u32("general.file_type") == 18);
  CHECK(*syn5->get_u32("general.file_type") == 17);
  auto rel_rms = [](const std::vector<float>& a, const std::vector<float>& b) {
    double e = 0, s = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      e += double(a[i] - b[i]) * (a[i] - b[i]);
      s += double(a[i]) * a[i];
    }
    return std::sqrt(e / s);
  };
  int n_q5 = 0, n_q6 = 0;
  for (auto& t : src->tensors()) {
    INFO("tensor " << t.name);
    CHECK(syn5->tensor(t.name)->type == f5->tensor(t.name)->type);
    if (t.n_dims == 1) {
      CHECK(f5->tensor(t.name)->type == GgmlType::F32);
      CHECK(f6->tensor(t.name)->type == GgmlType::F32);
      continue;
    }
    const GgmlType t4 = f4->tensor(t.name)->type;
    REQUIRE((t4 == GgmlType::Q4_K || t4 == GgmlType::Q6_K));
    const GgmlType want5 = t4 == GgmlType::Q6_K ? GgmlType::Q6_K : GgmlType::Q5_K;
    CHECK(f5->tensor(t.name)->type == want5);
    CHECK(f6->tensor(t.name)->type == GgmlType::Q6_K);
    n_q5 += want5 == GgmlType::Q5_K, n_q6 += want5 == GgmlType::Q6_K;
    const auto a = test::tensor_f32(t);
    const double e4 = rel_rms(a, test::tensor_f32(*f4->tensor(t.name)));
    const double e5 = rel_rms(a, test::tensor_f32(*f5->tensor(t.name)));
    const double e6 = rel_rms(a, test::tensor_f32(*f6->tensor(t.name)));
    INFO("relative RMS error: Q4_K_M " << e4 << ", Q5_K_M " << e5 << ", Q6_K " << e6);
    if (want5 == GgmlType::Q5_K) {
      CHECK(e5 < 0.7 * e4);  // one more bit: about half the step
      CHECK(e6 < 0.7 * e5);
    } else {
      CHECK(e5 == e4);  // the same Q6_K of the same values
      CHECK(e6 == e5);
    }
  }
  CHECK(n_q5 > 0);
  CHECK(n_q6 > 0);
}

TEST_CASE("quantize: same input, same bytes, whatever the thread count", "[convert][quantize]") {
  test::ScratchDir dir("quant_det");
  const std::string in = test::model_path("stories260K.gguf");
  const Run a = quantize(dir, in, "Q4_K_M", 1);
  const Run b = quantize(dir, in, "Q4_K_M", 2);
  CHECK(test::read_bytes(a.out) == test::read_bytes(b.out));
  // 64-wide rows fit no K-quant: every matrix falls back (and says so).
  CHECK(a.notes.size() == 2 + 5 * 7);
}

TEST_CASE("quantize: bad requests fail cleanly", "[convert][quantize]") {
  test::ScratchDir dir("quant_bad");
  const std::string out = dir.file("x.gguf");
  auto none = [](const std::string&) {};
  CHECK_THROWS_WITH(quantize_model(test::model_path("stories260K.gguf"), out, "Q3_K_M", 1, none),
                    Catch::Contains("unknown type 'Q3_K_M'") && Catch::Contains("Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K"));
  CHECK_THROWS_WITH(quantize_model(test::model_path("stories260K.gguf"), out, "F16", 1, none),
                    Catch::Contains("unknown type 'F16'"));
  CHECK_THROWS_WITH(quantize_model(dir.file("missing.gguf"), out, "Q8_0", 1, none),
                    Catch::Contains("missing.gguf") && Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(quantize_model(test::model_path("legacy/tinyllamas-stories-260k-f32.ggufv1.gguf"), out, "Q8_0", 1, none),
                    Catch::Contains("version 1 is not supported"));
  CHECK_THROWS_WITH(quantize_model(test::model_path("stories260K.gguf"), dir.file("no/dir/x.gguf"), "Q8_0", 1, none),
                    Catch::Contains("no/dir/x.gguf.tmp"));
  CHECK_FALSE(std::filesystem::exists(out));

  // A non-finite weight is reported with the tensor's name, and nothing is left.
  auto src = gguf::File::open(test::model_path("stories260K.gguf"));
  auto bytes = test::read_bytes(test::model_path("stories260K.gguf"));
  const gguf::TensorInfo* t = src->tensor("blk.2.attn_q.weight");
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + (t->data - src->bytes()) + 40, &nan, 4);
  const std::string bad = dir.file("nan.gguf");
  { std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size())); }
  CHECK_THROWS_WITH(quantize_model(bad, out, "Q8_0", 2, none),
                    Catch::Contains("blk.2.attn_q.weight") && Catch::Contains("not finite"));
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK_FALSE(std::filesystem::exists(out + ".tmp"));
}
