// Embeddings through the C API (fish_embed_tokens / fish_embed_texts) and
// `fish embed`:
//   - on stories260K (F32) the pooled hidden state equals the plain f64
//     forward of tests/moe (moe_reference.h, which runs dense models too):
//     mean, last and first pooling within 5e-4 of max |h| (the engine
//     computes in f32, K and V are f16 in both; measured up to 1.7e-4 on 23
//     tokens, the engine's own last logits 2.2e-4 of max |logit| there);
//   - normalisation gives unit length and is the raw vector over its norm;
//   - a batch of inputs gives each input's vector alone, bit for bit, and
//     leaves the other sequences' KV alone;
//   - the pooling modes differ as they should (first: the same vector for
//     every input that starts with BOS, a causal model's first token seeing
//     only itself);
//   - bad inputs are refused, naming the input;
//   - with the reference plugin's span the unit vectors match the CPU's
//     within 1e-3 (x comes back from the span, the norm on the CPU; the
//     plugin sums in its own order: measured 1.7e-4);
//   - `fish embed` prints one JSON object per input (JSON Lines) with the
//     C API's numbers, the same bytes with --batch-seqs 1, 3 and 8 (default).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fish/fish.h"
#include "moe_reference.h"
#include "test_model.h"
#include "test_paths.h"

using fish::test::bin_path;
using fish::test::model_path;

namespace {

struct Model {
  fish_model* m = nullptr;
  int32_t dim = 0;
  explicit Model(int n_seq = 1, int n_ctx = 256, int gpu_layers = 0) {
    fish_model_params p = fish_model_default_params();
    p.n_seq = n_seq;
    p.n_ctx = n_ctx;
    p.gpu_layers = gpu_layers;
    p.n_threads = 2;
    m = fish::test::require_model("stories260K.gguf", p);
    dim = fish_n_embd(m);
  }
  ~Model() { fish_model_free(m); }
  std::vector<int32_t> tokens(const std::string& text) const {
    std::vector<int32_t> ids(text.size() + 16);
    const int32_t n = fish_tokenize(m, text.data(), text.size(), 1, 0, ids.data(), int32_t(ids.size()));
    REQUIRE(n > 0);
    ids.resize(size_t(n));
    return ids;
  }
  std::vector<float> embed(const std::vector<std::vector<int32_t>>& in, int pooling, bool normalize, int seq = 0) {
    std::vector<const int32_t*> ptr;
    std::vector<int32_t> len;
    for (const auto& v : in) ptr.push_back(v.data()), len.push_back(int32_t(v.size()));
    fish_embed_params p = fish_embed_default_params();
    p.pooling = pooling;
    p.normalize = normalize;
    p.seq = seq;
    std::vector<float> out(in.size() * size_t(dim));
    const int rc = fish_embed_tokens(m, ptr.data(), len.data(), int32_t(in.size()), &p, out.data());
    INFO(fish_last_error(m));
    REQUIRE(rc == 0);
    return out;
  }
};

double max_abs(const std::vector<double>& v) {
  double mx = 0;
  for (double x : v) mx = std::max(mx, std::fabs(x));
  return mx;
}

// max |a - b| / max |b|
double rel_diff(const std::vector<float>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d / max_abs(b);
}

double norm(const float* v, int32_t n) {
  double s = 0;
  for (int32_t i = 0; i < n; ++i) s += double(v[i]) * v[i];
  return std::sqrt(s);
}

const char* kTexts[] = {"Once upon a time, there was a little cat.", "The dog ran to the park",
                        "Lily and Ben played with a big red ball in the garden all day"};

}  // namespace

TEST_CASE("embed: pooled hidden state equals the f64 reference forward", "[embed]") {
  Model md;
  fish::test::MoeReference ref(model_path("stories260K.gguf"));
  for (const char* text : kTexts) {
    const std::vector<int32_t> ids = md.tokens(text);
    ref.forward(ids);
    const auto& h = ref.hidden;
    REQUIRE(h.size() == ids.size());
    REQUIRE(int32_t(h[0].size()) == md.dim);
    std::vector<double> mean(size_t(md.dim), 0.0);
    for (const auto& row : h)
      for (int32_t j = 0; j < md.dim; ++j) mean[size_t(j)] += row[size_t(j)] / double(h.size());
    // The engine's own logits against the reference's, for scale.
    REQUIRE(fish_eval(md.m, ids.data(), int32_t(ids.size()), 0, 0) == 0);
    const float* lg = fish_get_logits(md.m, -1);
    REQUIRE(lg);
    const auto logits_ref = ref.forward(ids).back();
    const double dlog = rel_diff(std::vector<float>(lg, lg + logits_ref.size()), logits_ref);
    REQUIRE(fish_kv_truncate(md.m, 0) == 0);
    const double dm = rel_diff(md.embed({ids}, FISH_POOLING_MEAN, false), mean);
    const double dl = rel_diff(md.embed({ids}, FISH_POOLING_LAST, false), h.back());
    const double df = rel_diff(md.embed({ids}, FISH_POOLING_FIRST, false), h.front());
    std::printf("embed vs f64 reference (%zu tokens): mean %.3g, last %.3g, first %.3g of max |h| (bound 5e-4); "
                "the last logits %.3g of max |logit|\n", ids.size(), dm, dl, df, dlog);
    CHECK(dm <= 5e-4);
    CHECK(dl <= 5e-4);
    CHECK(df <= 5e-4);
  }
}

TEST_CASE("embed: normalised vectors have unit length and the raw vector's direction", "[embed]") {
  Model md;
  const std::vector<int32_t> ids = md.tokens(kTexts[0]);
  for (int pooling : {FISH_POOLING_MEAN, FISH_POOLING_LAST, FISH_POOLING_FIRST}) {
    const std::vector<float> raw = md.embed({ids}, pooling, false), unit = md.embed({ids}, pooling, true);
    const double n = norm(raw.data(), md.dim);
    CHECK(n > 0);
    CHECK(std::fabs(norm(unit.data(), md.dim) - 1.0) <= 1e-6);
    for (int32_t j = 0; j < md.dim; ++j) CHECK(std::fabs(unit[size_t(j)] - raw[size_t(j)] / n) <= 1e-6);
  }
  // The default parameters: mean pooling, normalised.
  const fish_embed_params d = fish_embed_default_params();
  CHECK(d.pooling == FISH_POOLING_MEAN);
  CHECK(d.normalize == 1);
}

TEST_CASE("embed: a batch of inputs gives each input's vector alone", "[embed]") {
  Model md(2);
  std::vector<std::vector<int32_t>> in;
  for (const char* t : kTexts) in.push_back(md.tokens(t));
  for (int pooling : {FISH_POOLING_MEAN, FISH_POOLING_LAST}) {
    const std::vector<float> all = md.embed(in, pooling, true);
    for (size_t i = 0; i < in.size(); ++i) {
      const std::vector<float> one = md.embed({in[i]}, pooling, true, 1);
      CHECK(std::memcmp(one.data(), all.data() + i * size_t(md.dim), size_t(md.dim) * sizeof(float)) == 0);
    }
  }
  // The text entry point tokenizes as fish_tokenize(add_special 1) and gives the same vectors.
  std::vector<float> out(in.size() * size_t(md.dim));
  std::vector<int32_t> n_tok(in.size());
  REQUIRE(fish_embed_texts(md.m, kTexts, 3, nullptr, out.data(), n_tok.data()) == 0);
  const std::vector<float> all = md.embed(in, FISH_POOLING_MEAN, true);
  CHECK(std::memcmp(out.data(), all.data(), out.size() * sizeof(float)) == 0);
  for (size_t i = 0; i < in.size(); ++i) CHECK(n_tok[i] == int32_t(in[i].size()));
}

TEST_CASE("embed: the other sequences keep their KV and their logits", "[embed]") {
  Model md(2);
  const std::vector<int32_t> prompt = md.tokens("Once upon a time");
  REQUIRE(fish_eval(md.m, prompt.data(), int32_t(prompt.size()), 0, 0) == 0);
  const int32_t next = 42;
  REQUIRE(fish_eval(md.m, &next, 1, int32_t(prompt.size()), 0) == 0);
  const float* l = fish_get_logits(md.m, -1);
  REQUIRE(l);
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(md.m, &info);
  const std::vector<float> before(l, l + info.n_vocab);
  // Embeddings on sequence 1, then sequence 0 goes on from where it was.
  md.embed({md.tokens(kTexts[2])}, FISH_POOLING_MEAN, true, 1);
  CHECK(fish_get_logits(md.m, -1) == nullptr);  // no logits were computed
  CHECK(fish_seq_len(md.m, 0) == int32_t(prompt.size()) + 1);
  CHECK(fish_seq_len(md.m, 1) == 0);
  REQUIRE(fish_eval(md.m, &next, 1, int32_t(prompt.size()), 0) == 0);  // position replaced
  l = fish_get_logits(md.m, -1);
  REQUIRE(l);
  CHECK(std::memcmp(l, before.data(), before.size() * sizeof(float)) == 0);
}

TEST_CASE("embed: pooling modes differ as expected", "[embed]") {
  Model md;
  const std::vector<int32_t> a = md.tokens(kTexts[0]), b = md.tokens(kTexts[1]);
  const std::vector<float> mean = md.embed({a}, FISH_POOLING_MEAN, true), last = md.embed({a}, FISH_POOLING_LAST, true),
                           first = md.embed({a}, FISH_POOLING_FIRST, true);
  CHECK(mean != last);
  CHECK(mean != first);
  CHECK(last != first);
  // The first token (BOS in both) sees only itself: the same vector whatever follows.
  REQUIRE(a[0] == b[0]);
  CHECK(md.embed({b}, FISH_POOLING_FIRST, true) == first);
  CHECK(md.embed({b}, FISH_POOLING_MEAN, true) != mean);
  // One token: the three poolings agree.
  const std::vector<int32_t> one = {a[0]};
  CHECK(md.embed({one}, FISH_POOLING_MEAN, true) == md.embed({one}, FISH_POOLING_LAST, true));
}

TEST_CASE("embed: bad inputs are refused, naming the input", "[embed]") {
  Model md(1, 32);
  fish_embed_params p = fish_embed_default_params();
  std::vector<float> out(size_t(md.dim) * 2);
  const std::vector<int32_t> good = md.tokens("a cat");
  auto call = [&](const std::vector<int32_t>& second) {
    const int32_t* ptr[2] = {good.data(), second.data()};
    const int32_t len[2] = {int32_t(good.size()), int32_t(second.size())};
    return fish_embed_tokens(md.m, ptr, len, 2, &p, out.data());
  };
  CHECK(call({}) != 0);
  CHECK(std::string(fish_last_error(md.m)).find("input 1 has no tokens") != std::string::npos);
  CHECK(call(std::vector<int32_t>(33, 5)) != 0);
  CHECK(std::string(fish_last_error(md.m)).find("context length 32") != std::string::npos);
  CHECK(call({1, 100000}) != 0);
  CHECK(std::string(fish_last_error(md.m)).find("outside the vocabulary") != std::string::npos);
  p.pooling = 7;
  CHECK(call(good) != 0);
  p = fish_embed_default_params();
  p.seq = 1;
  CHECK(call(good) != 0);
  p = fish_embed_default_params();
  CHECK(call(std::vector<int32_t>(32, 5)) == 0);  // exactly the context fits
  const char* texts[] = {""};
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(md.m, &info);
  // "" is BOS alone (add_special): one token, accepted.
  CHECK(fish_embed_texts(md.m, texts, 1, nullptr, out.data(), nullptr) == 0);
  CHECK(fish_embed_tokens(nullptr, nullptr, nullptr, 0, nullptr, nullptr) != 0);
}

#ifdef FISH_TEST_REFERENCE
TEST_CASE("embed: through the reference plugin's span the vectors match the CPU", "[embed][plugin]") {
  std::vector<float> cpu, span;
  std::vector<std::vector<int32_t>> in;
  {
    Model md;
    for (const char* t : kTexts) in.push_back(md.tokens(t));
    cpu = md.embed(in, FISH_POOLING_MEAN, true);
  }
  fish_backend_use_file(FISH_TEST_REFERENCE);
  {
    Model md(1, 256, -1);
    fish_model_info info{};
    info.struct_size = sizeof info;
    fish_model_get_info(md.m, &info);
    INFO("backend " << info.backend << ", gpu_span " << info.gpu_span << ", gpu layers " << info.gpu_layers);
    CHECK(info.gpu_span == 1);
    span = md.embed(in, FISH_POOLING_MEAN, true);
  }
  fish_backend_use_file(nullptr);
  double d = 0;
  for (size_t i = 0; i < cpu.size(); ++i) d = std::max(d, std::fabs(double(cpu[i]) - double(span[i])));
  std::printf("embed: reference span vs CPU: max difference %.3g (bound 1e-3, unit vectors)\n", d);
  CHECK(d <= 1e-3);
}
#endif

namespace {

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

std::vector<nlohmann::json> lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  size_t at = 0;
  while (at < out.size()) {
    size_t nl = out.find('\n', at);
    if (nl == std::string::npos) nl = out.size();
    if (nl > at) v.push_back(nlohmann::json::parse(out.substr(at, nl - at)));
    at = nl + 1;
  }
  return v;
}

}  // namespace

TEST_CASE("embed: fish embed prints one JSON object per input with the C API's vector", "[embed][cli]") {
  const std::string fish = bin_path("fish") + " embed -m " + model_path("stories260K.gguf") + " -t 2 -ngl 0";
  Model md;
  int status = 0;
  std::string out = run(fish + " -p 'The dog ran to the park' 2>/dev/null", &status);
  REQUIRE(status == 0);
  std::vector<nlohmann::json> v = lines(out);
  REQUIRE(v.size() == 1);
  const std::vector<float> want = md.embed({md.tokens(kTexts[1])}, FISH_POOLING_MEAN, true);
  CHECK(v[0]["index"] == 0);
  CHECK(v[0]["dim"] == md.dim);
  CHECK(v[0]["n_tokens"] == int32_t(md.tokens(kTexts[1]).size()));
  REQUIRE(v[0]["embedding"].size() == size_t(md.dim));
  for (int32_t j = 0; j < md.dim; ++j) CHECK(v[0]["embedding"][size_t(j)].get<float>() == want[size_t(j)]);

  // -f: one input per line (a blank one skipped), --pooling last, --no-normalize.
  const std::string file = std::string(FISH_BIN_DIR) + "/test_embed_inputs.txt";
  std::ofstream(file) << kTexts[0] << "\n\n" << kTexts[2] << "\n";
  out = run(fish + " -f " + file + " --pooling last --no-normalize 2>/dev/null", &status);
  REQUIRE(status == 0);
  v = lines(out);
  REQUIRE(v.size() == 2);
  const std::vector<float> raw = md.embed({md.tokens(kTexts[0]), md.tokens(kTexts[2])}, FISH_POOLING_LAST, false);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(v[i]["index"] == i);
    for (int32_t j = 0; j < md.dim; ++j)
      CHECK(v[i]["embedding"][size_t(j)].get<float>() == raw[i * size_t(md.dim) + size_t(j)]);
  }
  std::remove(file.c_str());

  // A pooling it does not know: exit 2 with the flag named.
  out = run(fish + " -p x --pooling max 2>&1", &status);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out.find("--pooling") != std::string::npos);
}

TEST_CASE("embed: fish embed prints the same lines packing 1, 3 or 8 inputs per forward", "[embed][cli]") {
  const std::string fish = bin_path("fish") + " embed -m " + model_path("stories260K.gguf") + " -t 2 -ngl 0";
  // Eleven inputs: short ones, one word, and one of about 700 tokens (two pieces).
  const std::string file = std::string(FISH_BIN_DIR) + "/test_embed_batch_seqs.txt";
  {
    std::ofstream f(file);
    for (int i = 0; i < 3; ++i)
      for (const char* t : kTexts) f << t << "\n";
    f << "Once\n";
    for (int i = 0; i < 60; ++i) f << kTexts[i % 3] << " ";
    f << "\n";
  }
  int status = 0;
  const std::string one = run(fish + " -f " + file + " --batch-seqs 1 2>/dev/null", &status);
  REQUIRE(status == 0);
  REQUIRE(lines(one).size() == 11);
  CHECK(lines(one)[10]["n_tokens"].get<int>() > 512);
  for (const char* flag : {" --batch-seqs 3", " --batch-seqs 8", ""}) {
    INFO("flag '" << flag << "'");
    const std::string many = run(fish + " -f " + file + flag + " 2>/dev/null", &status);
    REQUIRE(status == 0);
    CHECK(many == one);
  }
  // The summary line says how many went together (no more sequences than inputs).
  std::string err = run(fish + " -f " + file + " 2>&1 >/dev/null", &status);
  CHECK(err.find("8 at a time") != std::string::npos);
  err = run(fish + " -p x 2>&1 >/dev/null", &status);
  CHECK(err.find("1 at a time") != std::string::npos);
  std::remove(file.c_str());
  // Out of range: exit 2 with the flag named.
  for (const char* bad : {"0", "257", "x"}) {
    err = run(fish + " -p x --batch-seqs " + bad + " 2>&1", &status);
    CHECK(WEXITSTATUS(status) == 2);
    CHECK(err.find("--batch-seqs") != std::string::npos);
  }
}
