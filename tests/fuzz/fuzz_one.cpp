#include "fuzz_one.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "convert/describe.h"
#include "cpu/matmul.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace fish::fuzz {

namespace {

// Plain words, digits, punctuation, white space runs, accented and CJK text, an
// emoji, a stray UTF-8 continuation byte and the common special-token spellings:
// every pre-tokenizer's branches and the byte fall-back get something.
constexpr char kText[] =
    "Once upon a time, 12345 cats said \"hi!\"  \t\n\n  it's DON'T 3.14 <s></s><unk> <|endoftext|>"
    "<|begin_of_text|><|im_start|> caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x90\x9f \x80 end";

template <class Fn>
void run_stage(Stage& s, Fn&& fn) {
  try {
    fn();
    s.ok = true;
  } catch (const Error& e) {
    s.error = e.what();
  } catch (const std::exception& e) {
    s.clean = false;
    s.error = e.what();
  } catch (...) {
    s.clean = false;
    s.error = "an exception that is not a std::exception";
  }
}

// Encode, decode and print pieces, as fish tokenize and fish run do.
void exercise_tokenizer(const Tokenizer& t, std::string& out) {
  out += std::string("tokenizer ") + t.kind() + " n_vocab " + std::to_string(t.n_vocab()) + " bos " +
         std::to_string(t.bos()) + " eos " + std::to_string(t.eos()) + " pre '" + std::string(t.pre_name()) + "'\n";
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = t.encode(kText, special, special);
    for (int32_t id : ids)
      if (id < 0 || id >= t.n_vocab())  // a bug, not bad input: not a fish::Error
        throw std::logic_error("encode gave id " + std::to_string(id) + " outside the vocabulary");
    out += t.decode(ids, special);
    out += '\n';
    for (size_t i = 0; i < ids.size() && i < 64; ++i) {
      out += t.token_to_piece(ids[i], special);
      (void)t.is_eog(ids[i]);
    }
    out += '\n';
  }
  const int32_t n = t.n_vocab();
  for (int32_t id : {0, 1, 2, n / 2, n - 1, t.bos(), t.eos()})
    if (id >= 0 && id < n) {
      out += t.token_to_piece(id, true);
      out += std::string(t.token_text(id));
      (void)t.token_attr(id);
    }
  out += '\n';
}

// What fish_model_get_info reports (and fish run --verbose prints).
void describe_model(const LlamaModel& m, std::string& out) {
  const Hparams& h = m.hparams();
  out += "arch " + h.arch_name + " name '" + h.name + "' n_vocab " + std::to_string(h.n_vocab) + " n_ctx_train " +
         std::to_string(h.n_ctx_train) + " n_ctx " + std::to_string(m.n_ctx()) + " n_embd " + std::to_string(h.n_embd) +
         " n_layer " + std::to_string(h.n_layer) + " n_head " + std::to_string(h.n_head) + "/" +
         std::to_string(h.n_head_kv) + " head_dim " + std::to_string(h.head_dim) + " n_ff " + std::to_string(h.n_ff) +
         " n_params " + std::to_string(m.n_params()) + " bytes " + std::to_string(m.file().size()) + " threads " +
         std::to_string(m.n_threads()) + " gpu_layers " + std::to_string(m.gpu_layers()) + " kernels " +
         matmul_kernel_name() + "\n";
  exercise_tokenizer(m.tokenizer(), out);
}

// What fish run does next, in small: a 3-token prompt, then one generated token
// (greedy, as --temp 0 picks it). The weights are whatever the file holds: NaN
// and inf give NaN logits, but never a crash or undefined behaviour.
void generate(LlamaModel& m, std::string& out) {
  const int32_t n_vocab = m.hparams().n_vocab;
  const int32_t prompt[3] = {0, n_vocab - 1, n_vocab / 2};
  m.eval(prompt, 3, 0, true);
  const float* l = m.logits(-1);
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab; ++i)
    if (l[i] > l[best]) best = i;
  m.eval(&best, 1, 3, false);
  out += "generated " + std::to_string(best) + " kv " + std::to_string(m.kv_len()) + "\n";
}

Outcome run(const std::string& path) {
  Outcome o;
  run_stage(o.info, [&] { o.text += convert::describe_file(path); });
  run_stage(o.vocab, [&] {
    ModelOptions opt;
    opt.vocab_only = true;
    opt.n_threads = 1;
    auto m = LlamaModel::load(path, opt);
    exercise_tokenizer(m->tokenizer(), o.text);
  });
  run_stage(o.model, [&] {
    ModelOptions opt;
    opt.n_threads = 1;
    opt.gpu_layers = 0;  // CPU only: no plugin is loaded
    auto m = LlamaModel::load(path, opt);
    describe_model(*m, o.text);
    generate(*m, o.text);
  });
  return o;
}

// The in-memory file run_bytes reuses.
struct MemFile {
  int fd = -1;
  std::string path;
  MemFile() {
#ifdef MFD_CLOEXEC
    fd = memfd_create("fish-fuzz.gguf", MFD_CLOEXEC);
    if (fd >= 0) path = "/proc/self/fd/" + std::to_string(fd);
#endif
    if (fd < 0) {
      const char* dir = std::getenv("TMPDIR");
      std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/fish-fuzz-XXXXXX";
      std::vector<char> buf(tmpl.begin(), tmpl.end());
      buf.push_back('\0');
      fd = mkstemp(buf.data());
      if (fd < 0) {
        std::perror("fish fuzz: no memfd and no temporary file");
        std::abort();
      }
      path = buf.data();
      unlink(path.c_str());  // reopened through /proc below, gone at exit
      path = "/proc/self/fd/" + std::to_string(fd);
    }
  }
  void set(const uint8_t* data, size_t size) {
    if (ftruncate(fd, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t w = pwrite(fd, data + done, size - done, off_t(done));
      if (w <= 0) {
        std::perror("fish fuzz: writing the in-memory file");
        std::abort();
      }
      done += size_t(w);
    }
  }
};

}  // namespace

Outcome run_file(const std::string& path) { return run(path); }

Outcome run_bytes(const uint8_t* data, size_t size) {
  static MemFile mem;
  mem.set(data, size);
  return run(mem.path);
}

}  // namespace fish::fuzz
