// The fuzz target's regression corpus: every file in tests/fuzz/regressions
// (the crafted files for the bugs issue 22 lists, and every crasher a fuzz
// campaign found) goes through fuzz_one as the fuzzer runs it. Each must be
// refused with a fish::Error whose message begins with the file's path (and
// names the field), or, where the table below says so, load and run; never a
// crash, a hang, a sanitizer report or another exception type. The crafted
// files' messages are checked word for word. CI also
// runs this under ASan + UBSan (the clang fuzz build, tests/run.sh).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_models.h"
#include "fuzz_one.h"
#include "fuzz_template.h"
#include "test_paths.h"

using namespace fish;
using fish::test::source_path;

namespace {

const std::string kDir = source_path("tests/fuzz/regressions");

std::vector<std::string> regression_files() {
  std::vector<std::string> names;
  if (DIR* d = opendir(kDir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What each stage of fuzz_one must end with ("" = it loads and runs), {path}
// standing for the file.
struct Expect {
  std::string vocab, model;
};

// The crafted files (make_fuzz_seeds --regressions). fish info describes every
// one of them: their headers are valid GGUF.
const std::map<std::string, Expect>& crafted() {
  static const std::map<std::string, Expect> m = {
      {"block-count-2p24.gguf",
       {"", "{path}: metadata 'llama.block_count' = 16777216, but the file holds 12 tensors (a layer has at least 9)"}},
      {"block-count-2p30.gguf",
       {"", "{path}: metadata 'llama.block_count' = 1073741824, but the file holds 12 tensors (a layer has at least 9)"}},
      {"head-count-2p28.gguf",
       {"", "{path}: metadata 'llama.attention.head_count' = 268435456 times key_length 32 exceeds 2^30"}},
      {"vocab-size-0.gguf", {"", "{path}: metadata 'llama.vocab_size' = 0: expected 1 .. 2^30"}},
      {"empty-token-list.gguf",
       {"{path}: metadata 'tokenizer.ggml.tokens': is empty",
        "{path}: metadata 'tokenizer.ggml.tokens' holds 0 tokens: expected 1 .. 2^30"}},
      {"token-embd-rows-0.gguf", {"", "{path}: tensor 'token_embd.weight' has shape [32, 0]: the vocabulary is empty"}},
      {"empty-vocab-tied.gguf",
       {"{path}: metadata 'tokenizer.ggml.tokens': is empty", "{path}: metadata 'llama.vocab_size' = 0: expected 1 .. 2^30"}},
      // Not a refusal: NaN weights are legal, and run to NaN logits without UB.
      {"nan-norm-kstrip.gguf", {"", ""}},
  };
  return m;
}

std::string subst(std::string s, const std::string& path) {
  const size_t p = s.find("{path}");
  if (p != std::string::npos) s.replace(p, 6, path);
  return s;
}

}  // namespace

TEST_CASE("fuzz regressions: every file is refused with a fish::Error naming the file, or runs", "[fuzz]") {
  const auto names = regression_files();
  REQUIRE(names.size() >= crafted().size());
  for (const std::string& n : names) {
    const std::string path = kDir + "/" + n;
    struct stat st {};
    REQUIRE(stat(path.c_str(), &st) == 0);
    INFO(n << " (" << st.st_size << " bytes)");
    CHECK(st.st_size < 64 * 1024);  // kept tiny
    const fuzz::Outcome o = fuzz::run_file(path);
    INFO("info: " << o.info.error << "\nvocab: " << o.vocab.error << "\nmodel: " << o.model.error);
    CHECK(o.clean());
    const auto c = crafted().find(n);
    const bool runs = c != crafted().end() && c->second.model.empty();
    CHECK(o.model.ok == runs);  // every other file is a bad one
    for (const fuzz::Stage* s : {&o.info, &o.vocab, &o.model})
      if (!s->ok) CHECK(s->error.rfind(path + ": ", 0) == 0);
  }
}

TEST_CASE("fuzz regressions: the crafted files' messages, word for word", "[fuzz]") {
  for (const auto& [name, want] : crafted()) {
    const std::string path = kDir + "/" + name;
    INFO(name);
    const fuzz::Outcome o = fuzz::run_file(path);
    CHECK(o.info.ok);
    CHECK(o.vocab.ok == want.vocab.empty());
    CHECK(o.vocab.error == subst(want.vocab, path));
    CHECK(o.model.ok == want.model.empty());
    CHECK(o.model.error == subst(want.model, path));
  }
}

TEST_CASE("fuzz regressions: the committed crafted files are what the generator writes", "[fuzz]") {
  const std::string dir = "/tmp/fish-fuzz-regen-" + std::to_string(::getpid());
  const auto paths = fuzz::write_regressions(dir);
  CHECK(paths.size() == crafted().size());
  for (const std::string& p : paths) {
    const std::string name = p.substr(p.rfind('/') + 1);
    INFO(name);
    CHECK(crafted().count(name) == 1);
    CHECK(slurp(p) == slurp(kDir + "/" + name));
    std::remove(p.c_str());
  }
  ::rmdir(dir.c_str());
}

TEST_CASE("fuzz seeds: every seed model loads, every seed vocabulary describes", "[fuzz]") {
  const std::string dir = "/tmp/fish-fuzz-seeds-" + std::to_string(::getpid());
  const auto paths = fuzz::write_seeds(dir, FISH_SHARED_DIR);
  CHECK(paths.size() >= 8);
  for (const std::string& p : paths) {
    const std::string name = p.substr(p.rfind('/') + 1);
    struct stat st {};
    stat(p.c_str(), &st);
    INFO(name << " (" << st.st_size << " bytes)");
    CHECK(st.st_size <= 64 * 1024);  // within run-campaign.sh's -max_len
    const fuzz::Outcome o = fuzz::run_file(p);
    INFO("info: " << o.info.error << "\nvocab: " << o.vocab.error << "\nmodel: " << o.model.error);
    CHECK(o.clean());
    CHECK(o.info.ok);
    if (name.rfind("vocab-", 0) != 0) {
      CHECK(o.vocab.ok);
      CHECK(o.model.ok);
    } else if (name != "vocab-ggml-vocab-bert-bge.gguf") {  // WordPiece: not a tokenizer fish has
      CHECK(o.vocab.ok);
    }
    std::remove(p.c_str());
  }
  ::rmdir(dir.c_str());
}

// The chat-template target's seeds: every real template of the shared models
// folder through fuzz_template (under 16 KB, run-campaign.sh's -max_len for
// it) parses and renders the target's conversations (gemma-2 refuses the
// system turn and the tool turn with raise_exception: only the third).
TEST_CASE("fuzz seeds: every real chat template parses and renders the fuzz target's conversations", "[fuzz]") {
  const std::string dir = test::shared_path("models/templates");
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() < 7 || name.compare(name.size() - 6, 6, ".jinja") != 0) continue;
      ++n;
      const std::string src = slurp(dir + "/" + name);
      INFO(name << " (" << src.size() << " bytes)");
      CHECK(src.size() <= 16 * 1024);
      const fuzz::TemplateOutcome o = fuzz::run_template(src);
      INFO(o.other);
      CHECK(o.clean());
      CHECK(o.parsed);
      CHECK(o.rendered >= (name.find("gemma") != std::string::npos ? 1 : 3));
    }
    closedir(d);
  }
  CHECK(n >= 10);
}
