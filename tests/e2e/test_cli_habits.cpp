// The command line as llama.cpp users type it: run -f, the stats line after
// the text's newline, --n-gpu-layers, context shift, bench's comma lists,
// progress and ratios, and a clear word for MoE models.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"

using namespace fish::test;

namespace {

struct Out {
  std::string out, err;
  int status = -1;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tmp_path(const std::string& name) {
  return "/tmp/fish-cli-habits-" + std::to_string(::getpid()) + "-" + name;
}

// Runs fish with `env` before it; stdout and stderr kept apart.
Out fish_cli(const std::string& args, const std::string& env = "FISH_GPU=0") {
  const std::string o = tmp_path("stdout"), e = tmp_path("stderr");
  Out r;
  run_command(env + " " + bin_path("fish") + " " + args + " >" + o + " 2>" + e, &r.status);
  r.out = slurp(o);
  r.err = slurp(e);
  std::remove(o.c_str());
  std::remove(e.c_str());
  return r;
}

std::vector<long> ids_of(const std::string& text) {
  std::vector<long> v;
  std::stringstream is(text);
  for (long x; is >> x;) v.push_back(x);
  return v;
}

const std::string kModel = model_path("stories260K.gguf");

}  // namespace

TEST_CASE("fish run -f FILE: the prompt from a file, stdout the continuation alone", "[e2e][cli]") {
  const std::string f = tmp_path("prompt.txt");
  std::ofstream(f, std::ios::binary) << "Once upon a time";
  const Out a = fish_cli("run -m " + kModel + " -f " + f + " -n 16 --temp 0 -t 2");
  const Out b = fish_cli("run -m " + kModel + " -p 'Once upon a time' -n 16 --temp 0 -t 2");
  std::remove(f.c_str());
  CHECK(a.status == 0);
  CHECK(a.out == b.out);
  CHECK(a.out.rfind(", there was a little girl named Lily.", 0) == 0);

  Out bad = fish_cli("run -m " + kModel + " -f /tmp -n 4");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("-f /tmp: not a regular file") != std::string::npos);
  bad = fish_cli("run -m " + kModel + " -f /nonexistent/prompt.txt -n 4");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("cannot open") != std::string::npos);
  bad = fish_cli("run -m " + kModel + " -f " + kModel + " -p hi -n 4");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("not both") != std::string::npos);
}

TEST_CASE("fish run: the text ends with a newline before the stats line, also in one pipe", "[e2e][cli]") {
  int st = -1;
  const std::string both = run_command(
      "FISH_GPU=0 " + bin_path("fish") + " run -m " + kModel + " -p 'Once upon a time' -n 8 --temp 0 -t 2 2>&1 | cat",
      &st);
  CHECK(st == 0);
  const size_t at = both.find("fish: prompt ");
  REQUIRE(at != std::string::npos);
  REQUIRE(at > 0);
  CHECK(both[at - 1] == '\n');
  CHECK(both.rfind(", there was a little", 0) == 0);
}

TEST_CASE("fish run --n-gpu-layers is -ngl's long form, and a repeated flag takes the last value", "[e2e][cli]") {
  const Out a = fish_cli("run -m " + kModel + " -p 'Once upon a time' -n 6 --temp 0 -t 2 --n-gpu-layers 0");
  CHECK(a.status == 0);
  CHECK(a.err.find("(0 GPU layers)") != std::string::npos);
  const Out b = fish_cli("run -m " + kModel + " -p 'Once upon a time' -n 3 -n 6 --temp 0 -t 2 -ngl 5 --n-gpu-layers 0");
  CHECK(b.status == 0);
  CHECK(b.out == a.out);
  const Out bad = fish_cli("run -m " + kModel + " -p hi --n-gpu-layers x");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("option --n-gpu-layers: 'x' is not an integer") != std::string::npos);
}

TEST_CASE("fish run: a full context shifts (keeping --keep and BOS) or stops with --no-context-shift", "[e2e][cli]") {
  const std::string base = "run -m " + kModel + " -p 'Once upon a time' --temp 0 -t 2 -c 24 --ids";
  // The prompt's length, BOS included.
  const Out tok = fish_cli("tokenize -m " + kModel + " -p 'Once upon a time'");
  const long n_prompt = long(ids_of(tok.out).size());
  REQUIRE(n_prompt > 1);

  Out r = fish_cli(base + " -n 60");
  CHECK(r.status == 0);
  CHECK(ids_of(r.out).size() == 60);
  CHECK(std::regex_search(r.err, std::regex("context shifted [0-9]+ times")));

  r = fish_cli(base + " -n 60 --keep -1");
  CHECK(r.status == 0);
  CHECK(ids_of(r.out).size() == 60);

  // Without shifting: every position of the context, plus the token sampled from the last one.
  r = fish_cli(base + " -n 60 --no-context-shift");
  CHECK(r.status == 0);
  CHECK(long(ids_of(r.out).size()) == 24 - n_prompt + 1);
  CHECK(r.err.find("the context (24 tokens) is full; stopped") != std::string::npos);

  // Up to the point the context fills, shifting changes nothing.
  const Out first = fish_cli(base + " -n " + std::to_string(24 - n_prompt + 1));
  const std::vector<long> a = ids_of(first.out), b = ids_of(fish_cli(base + " -n 60").out);
  REQUIRE(b.size() >= a.size());
  CHECK(std::vector<long>(b.begin(), b.begin() + long(a.size())) == a);

  const Out too_long = fish_cli("run -m " + kModel + " -p 'Once upon a time there was a little girl' -c 4 -n 4");
  CHECK(too_long.status == 1);
  CHECK(too_long.err.find("does not fit the context (4)") != std::string::npos);
}

TEST_CASE("fish bench: comma lists, a row per combination, progress on stderr", "[e2e][cli][bench]") {
  const Out r = fish_cli("bench -m " + kModel + " -p 8,16 -n 4 -t 1,2 -r 2");
  REQUIRE(r.status == 0);
  for (const char* row : {"| 1 | pp8 |", "| 1 | pp16 |", "| 1 | tg4 |", "| 2 | pp8 |", "| 2 | pp16 |", "| 2 | tg4 |"})
    CHECK(r.out.find(row) != std::string::npos);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 2 + 6);
  // In a pipe: plain lines naming each phase.
  CHECK(r.err.find("fish bench: loading...") != std::string::npos);
  CHECK(r.err.find("fish bench: repacking CPU weights done in") != std::string::npos);
  CHECK(r.err.find("fish bench: warm-up: pp8 on CPU, 1 threads...") != std::string::npos);
  CHECK(r.err.find("fish bench: tg4 on CPU, 2 threads done in") != std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);

  const Out d = fish_cli("bench -m " + kModel + " -p 0 -n 4 -d 0,16 -t 1 -r 1");
  CHECK(d.status == 0);
  CHECK(d.out.find("| tg4 |") != std::string::npos);
  CHECK(d.out.find("| tg4 @ d16 |") != std::string::npos);
  CHECK(d.out.find("pp") == std::string::npos);
}

TEST_CASE("fish bench -np: sequences decoding together, their aggregate rate and per sequence", "[e2e][cli][bench]") {
  const Out r = fish_cli("bench -m " + kModel + " -p 8 -n 4 -np 1,3 -d 0,5 -t 1 -r 1 -ngl 0");
  REQUIRE(r.status == 0);
  for (const char* row : {"| pp8 |", "| tg4 |", "| pp8 x3 |", "| tg4 x3 |", "| tg4 @ d5 x3 |"})
    CHECK(r.out.find(row) != std::string::npos);
  CHECK(r.out.find("tg4 x3, CPU, 1 threads: ") != std::string::npos);
  CHECK(r.out.find("tok/s per sequence") != std::string::npos);
  const Out bad = fish_cli("bench -m " + kModel + " -np 0");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("-np") != std::string::npos);
}

TEST_CASE("fish bench: nothing to measure or a bad list is an error", "[e2e][cli][bench]") {
  Out r = fish_cli("bench -m " + kModel + " -p 0 -n 0");
  CHECK(r.status == 2);
  CHECK(r.err.find("nothing to measure") != std::string::npos);
  CHECK(r.out.empty());
  r = fish_cli("bench -m " + kModel + " -p 8,,16");
  CHECK(r.status == 2);
  CHECK(r.err.find("not a comma list") != std::string::npos);
  r = fish_cli("bench -m " + kModel + " -t 0");
  CHECK(r.status == 2);
}

TEST_CASE("fish bench: the GPU/CPU ratio is each GPU row over its CPU row", "[e2e][cli][bench]") {
  // The reference plugin stands in for a GPU: its rows and the CPU's, in one run.
  const Out r = fish_cli("bench -m " + kModel + " -p 16 -n 4 -t 1,2 -r 2", "FISH_BACKEND=reference");
  REQUIRE(r.status == 0);
  std::map<std::string, double> ts;  // "backend|threads|test" -> mean t/s
  const std::regex row(R"(\| [^|]+ \| [^|]+ \| [^|]+ \| ([^|]+) \| \d+ \| (\d+) \| (\S+) \| ([0-9.]+) ± )");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), row), end; it != end; ++it) {
    const std::string be = (*it)[1].str().rfind("CPU", 0) == 0 ? "CPU" : "GPU";
    ts[be + "|" + (*it)[2].str() + "|" + (*it)[3].str()] = std::stod((*it)[4].str());
  }
  REQUIRE(ts.size() == 8);
  int ratios = 0;
  const std::regex ratio(R"(GPU/CPU (\S+), (\d+) threads: ([0-9.]+)x)");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), ratio), end; it != end; ++it, ++ratios) {
    const std::string k = (*it)[2].str() + "|" + (*it)[1].str();
    REQUIRE(ts.count("GPU|" + k));
    const double want = ts["GPU|" + k] / ts["CPU|" + k];
    INFO(k);
    CHECK(std::stod((*it)[3].str()) == Approx(want).margin(0.006 + want * 0.002));
    CHECK(std::stod((*it)[3].str()) > 0.0);
  }
  CHECK(ratios == 4);
}

TEST_CASE("fish bench --gpu-only: the GPU rows without the CPU rows", "[e2e][cli][bench]") {
  const Out r = fish_cli("bench -m " + kModel + " -p 16 -n 4 -t 1 -r 1 --gpu-only", "FISH_BACKEND=reference");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("| pp16 |") != std::string::npos);
  CHECK(r.out.find("| tg4 |") != std::string::npos);
  CHECK(r.out.find("| CPU") == std::string::npos);
  CHECK(r.out.find("GPU/CPU") == std::string::npos);
}

TEST_CASE("fish run: an MoE model without its experts is refused, naming the tensor", "[e2e][cli]") {
  // stories260K with Mixtral's key (llama + expert_count) but dense FFN tensors.
  auto f = fish::gguf::File::open(kModel);
  fish::gguf::Writer w;
  for (auto& kv : f->kvs()) w.set_value(kv.key, kv.value);
  w.set_u32("llama.expert_count", 8);
  w.set_u32("llama.expert_used_count", 2);
  for (auto& t : f->tensors()) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  const std::string path = tmp_path("llama-moe.gguf");
  w.write(path);
  const Out r = fish_cli("run -m " + path + " -p hi -n 4");
  std::remove(path.c_str());
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find("tensor 'blk.0.ffn_gate_inp.weight' is missing") != std::string::npos);
}
