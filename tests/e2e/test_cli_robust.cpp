// Hostile input gets one clear error and a plain exit status, never a signal:
// crafted GGUFs (empty vocabulary, a huge block_count, escape codes in the
// metadata), a FIFO or a folder where a file belongs, a device as an output,
// a model truncated while it runs, bad environment values and flags.
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_paths.h"

using namespace fish::test;

namespace {

struct Out {
  std::string out, err;
  int status = -1;  // exit status; -1 when killed by a signal
};

std::string tmp_path(const std::string& name) { return "/tmp/fish-robust-" + std::to_string(::getpid()) + "-" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Out fish_cmd(const std::string& args, const std::string& env = "FISH_GPU=0") {
  const std::string o = tmp_path("stdout"), e = tmp_path("stderr");
  Out r;
  run_command(env + " " + bin_path("fish") + " " + args + " >" + o + " 2>" + e, &r.status);
  r.out = slurp(o);
  r.err = slurp(e);
  std::remove(o.c_str());
  std::remove(e.c_str());
  return r;
}

// stories260K with its metadata and tensors, edited by `edit`, written to `path`.
void write_variant(const std::string& path, const std::function<void(fish::gguf::Writer&)>& edit,
                   const std::function<bool(const fish::gguf::TensorInfo&, fish::gguf::Writer&)>& tensor = nullptr) {
  auto f = fish::gguf::File::open(model_path("stories260K.gguf"));
  fish::gguf::Writer w;
  for (auto& kv : f->kvs()) w.set_value(kv.key, kv.value);
  edit(w);
  for (auto& t : f->tensors())
    if (!tensor || !tensor(t, w)) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data);
  w.write(path);
}

}  // namespace

TEST_CASE("robust: an empty vocabulary is a clear error for run, bench, perplexity and quantize", "[e2e][robust]") {
  const std::string path = tmp_path("empty-vocab.gguf");
  static const float none = 0;
  write_variant(
      path,
      [](fish::gguf::Writer& w) {
        w.set_str_array("tokenizer.ggml.tokens", {});
        w.remove("tokenizer.ggml.scores");
        w.remove("tokenizer.ggml.token_type");
      },
      [](const fish::gguf::TensorInfo& t, fish::gguf::Writer& w) {
        if (t.name != "token_embd.weight" && t.name != "output.weight") return false;
        w.add_tensor(t.name, t.type, {t.ne[0], 0}, &none);
        return true;
      });
  for (const std::string& cmd : {"run -m " + path + " -p hi -n 4", "bench -m " + path + " -p 8 -n 4 -r 1",
                                "perplexity -m " + path + " -f " + shared_path("reference/texts/story-a.txt")}) {
    const Out r = fish_cmd(cmd);
    INFO(cmd << "\n" << r.err);
    CHECK(r.status == 1);
    CHECK((r.err.find("tokens: expected 1 .. 2^30") != std::string::npos ||
           r.err.find("the vocabulary is empty") != std::string::npos));
  }
  const std::string q = tmp_path("empty-vocab-q8.gguf");
  const Out r = fish_cmd("quantize " + path + " " + q + " Q8_0");
  CHECK(r.status == 1);
  CHECK(r.err.find("the vocabulary is empty") != std::string::npos);
  struct stat st {};
  CHECK(stat(q.c_str(), &st) != 0);  // nothing written
  std::remove(path.c_str());
}

TEST_CASE("robust: a block_count the file cannot hold is refused at once, naming the field", "[e2e][robust]") {
  for (uint32_t n : {16777216u, 1u << 30}) {
    const std::string path = tmp_path("blocks.gguf");
    write_variant(path, [n](fish::gguf::Writer& w) { w.set_u32("llama.block_count", n); });
    const auto t0 = std::chrono::steady_clock::now();
    const Out r = fish_cmd("run -m " + path + " -p hi -n 4");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::remove(path.c_str());
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("'llama.block_count' = " + std::to_string(n) + ", but the file holds") != std::string::npos);
    CHECK(r.err.find("bad_alloc") == std::string::npos);
    CHECK(s < 10.0);  // refused before any allocation sized by it (was 13 s and 8.3 GB)
  }
}

TEST_CASE("robust: fish info shows metadata with control characters escaped", "[e2e][robust]") {
  const std::string path = tmp_path("escape.gguf");
  write_variant(path, [](fish::gguf::Writer& w) { w.set_str("general.name", "evil\x1b[2J\x1b]0;title\x07 name\xc2\x9b"); });
  const Out r = fish_cmd("info " + path);
  std::remove(path.c_str());
  CHECK(r.status == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x07') == std::string::npos);
  CHECK(r.out.find("\xc2\x9b") == std::string::npos);
  CHECK(r.out.find("evil\\x1B[2J\\x1B]0;title\\x07 name\\x9B") != std::string::npos);
}

TEST_CASE("robust: a FIFO or a folder as the model or the prompt file is refused, not waited on", "[e2e][robust]") {
  const std::string fifo = tmp_path("fifo");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  Out r = fish_cmd("run -m " + fifo + " -p hi");
  CHECK(r.status == 1);
  CHECK(r.err.find("not a regular file (a FIFO)") != std::string::npos);
  r = fish_cmd("info " + fifo);
  CHECK(r.status == 1);
  CHECK(r.err.find("not a regular file (a FIFO)") != std::string::npos);
  r = fish_cmd("tokenize -m " + model_path("stories260K.gguf") + " -f " + fifo);
  CHECK(r.status == 2);
  CHECK(r.err.find("not a regular file") != std::string::npos);
  r = fish_cmd("tokenize -m " + model_path("stories260K.gguf") + " -f /tmp");
  CHECK(r.status == 2);
  CHECK(r.err.find("-f /tmp: not a regular file") != std::string::npos);
  r = fish_cmd("run -m /tmp -p hi");
  CHECK(r.status == 1);
  CHECK(r.err.find("not a regular file (a directory)") != std::string::npos);
  std::remove(fifo.c_str());
}

TEST_CASE("robust: the writers never replace a device, FIFO or folder", "[e2e][robust]") {
  const std::string fifo = tmp_path("out-fifo");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& out : {fifo, std::string("/dev/null"), std::string("/tmp")}) {
    const Out r = fish_cmd("quantize " + model_path("stories260K.gguf") + " " + out + " Q8_0");
    INFO(out << ": " << r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find(out + ": exists and is not a regular file") != std::string::npos);
    CHECK(r.err.find("wrote") == std::string::npos);
    struct stat st {};
    REQUIRE(stat(out.c_str(), &st) == 0);
    CHECK(!S_ISREG(st.st_mode));
  }
  struct stat st {};
  REQUIRE(stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  std::remove(fifo.c_str());
  const Out r = fish_cmd("synth --shape tiny --type Q8_0 -o /dev/null");
  CHECK(r.status == 1);
  CHECK(r.err.find("/dev/null: exists and is not a regular file") != std::string::npos);
}

TEST_CASE("robust: a model truncated while it runs ends with a clear error, not SIGBUS", "[e2e][robust]") {
  const std::string path = tmp_path("shrinking.gguf");
  {
    std::ifstream in(model_path("synth-tiny-Q4_K_M.gguf"), std::ios::binary);
    std::ofstream out(path, std::ios::binary);
    out << in.rdbuf();
  }
  const std::string e = tmp_path("trunc-stderr");
  const std::string cmd = "FISH_GPU=0 " + bin_path("fish") + " run -m " + path +
                          " -p 'Once upon a time' -n 100000000 -c 64 --temp 0 -t 1 >/dev/null 2>" + e;
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // loaded and generating
  REQUIRE(truncate(path.c_str(), 4096) == 0);
  int st = 0;
  pid_t done = 0;
  for (int i = 0; i < 300 && (done = waitpid(pid, &st, WNOHANG)) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  const std::string err = slurp(e);
  std::remove(path.c_str());
  std::remove(e.c_str());
  INFO(err);
  REQUIRE(done == pid);
  REQUIRE(WIFEXITED(st));  // sh reports a signal-killed child as 128 + signo
  CHECK(WEXITSTATUS(st) == 1);
  CHECK(err.find(path + " changed or was truncated while in use") != std::string::npos);
}

TEST_CASE("robust: a bad FISH_CPU_KERNELS is a warning naming what it accepts, not an abort", "[e2e][robust]") {
  // The engine's configuration parser (common/engine_config.h): the default
  // kernels run, and the warning says so.
  const Out r = fish_cmd("run -m " + model_path("stories260K.gguf") + " -p hi -n 4", "FISH_GPU=0 FISH_CPU_KERNELS=bogus");
  CHECK(r.status == 0);
  CHECK(r.err.find("fish: warning: FISH_CPU_KERNELS='bogus' is not scalar, avx2, avxvnni or avx512; using the default (the "
                   "widest this CPU runs)\n") != std::string::npos);
  CHECK_FALSE(r.out.empty());
}

TEST_CASE("robust: sampling flags out of range are refused, naming the flag", "[e2e][robust]") {
  const std::string base = "run -m " + model_path("stories260K.gguf") + " -p hi -n 4 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--top-p 2", "--top-p = 2"},        {"--top-p -1", "--top-p = -1"},
      {"--top-p nan", "--top-p = nan"},    {"--min-p nan", "--min-p = nan"},
      {"--repeat-penalty 0", "--repeat-penalty = 0"}, {"--temp -1", "--temp = -1"},
      {"--temp inf", "--temp = inf"},      {"--repeat-last-n -5", "--repeat-last-n"},
      {"--presence-penalty 3", "--presence-penalty = 3"}, {"--frequency-penalty -2.5", "--frequency-penalty = -2.5"},
      {"--frequency-penalty nan", "--frequency-penalty = nan"}, {"--seed -2", "--seed must be >= 0 (-1: random)"}};
  for (const auto& [flag, want] : cases) {
    const Out r = fish_cmd(base + flag);
    INFO(flag << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(r.out.empty());
  }
  // The largest -n is no overflow: the context shifts and the run is cut by -n alone.
  const Out big = fish_cmd("run -m " + model_path("stories260K.gguf") + " -p hi -n 9223372036854775807 -c 16 --temp 0 "
                           "--no-context-shift --ids");
  CHECK(big.status == 0);
  CHECK(big.err.find("is full; stopped") != std::string::npos);
  // A repeated -m takes the last one.
  const Out twice = fish_cmd("run -m /nonexistent.gguf -m " + model_path("stories260K.gguf") + " -p hi -n 2 --temp 0");
  CHECK(twice.status == 0);
}
