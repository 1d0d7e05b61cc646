// fish_bench_tokenizer: tokenises 1 MiB of mixed English / code / Unicode text
// with the GPT-2 vocab on one thread and prints the speed. Not a test (timings
// depend on the machine); the target is under 0.5 s per MiB.
//
//   fish_bench_tokenizer [path/to/ggml-vocab-gpt-2.gguf] [repeats]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

// CPU time of this thread: the machine may be shared, so wall time alone can
// count time spent waiting for a core.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Deterministic mixed text: paragraphs picked by a fixed LCG, with numbers and
// identifiers varied so that the words are not all repeats.
std::string make_text(size_t bytes) {
  static const char* const kParts[] = {
      "The quick brown fox jumps over the lazy dog. It wasn't the first time; they'd all seen it before, "
      "and nobody's going to believe what happened next.\n\n",
      "In 1969, Apollo 11 landed on the Moon. About 600 million people watched the broadcast, roughly "
      "one fifth of the world's population at the time.\n",
      "int main(int argc, char** argv) {\n    std::vector<int> xs{1, 2, 3};\n    for (auto& x : xs) x *= 2;\n"
      "    return xs.size() > 2 ? 0 : -1;\n}\n",
      "def tokenize(text: str) -> list[int]:\n    \"\"\"Split and merge.\"\"\"\n    return [vocab[w] for w in "
      "re.findall(PATTERN, text)]  # TODO: cache\n",
      "Grüße aus München! Die Straße ist naß, aber das Café hat geöffnet. Ça va très bien, merci. ",
      "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xbc\xd0\xb8\xd1\x80! "
      "\xd0\x9a\xd0\xb0\xd0\xba \xd0\xb4\xd0\xb5\xd0\xbb\xd0\xb0? ",
      "\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8\xe8\x8b\xb9\xe6\x9e\x9c\xe5\xb7\xa5\xe4\xbd\x9c\xe3\x80\x82"
      "\xe4\xbb\x8a\xe6\x97\xa5\xe3\x81\xaf\xe8\x89\xaf\xe3\x81\x84\xe5\xa4\xa9\xe6\xb0\x97\xe3\x81\xa7\xe3\x81\x99\xe3\x80\x82 ",
      "Emoji: \xf0\x9f\x9a\x80 \xf0\x9f\xa6\x99 \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f \xe2\x9c\x85 "
      "\xe1\x9e\x80\xe1\x9e\xb6\xe1\x9e\x93\xe1\x9f\x8b ",
      "    if (err != nil) {\n\t\treturn fmt.Errorf(\"read %s: %w\", path, err)\n\t}\n",
      "<div class=\"row\"><span id='x'>--- ===== &amp; ''' ``` \"\"\" ...... !!!!!! ?!?!?!? </span></div>\n",
  };
  const size_t n_parts = sizeof(kParts) / sizeof(kParts[0]);
  std::string out;
  out.reserve(bytes + 1024);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  };
  while (out.size() < bytes) {
    out += kParts[next() % n_parts];
    out += "var_" + std::to_string(next() % 100000) + " = " + std::to_string(next()) + "; ";
  }
  // Cut at a character boundary at or below `bytes`, then pad with spaces.
  size_t cut = bytes;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  out.append(bytes - cut, ' ');
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : std::string(FISH_SHARED_DIR) + "/models/vocab/ggml-vocab-gpt-2.gguf";
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  try {
    auto file = fish::gguf::File::open(path);
    auto tok = fish::Tokenizer::from_gguf(*file);
    const std::string text = make_text(size_t(1) << 20);
    std::vector<double> secs, cpu;
    std::vector<int32_t> ids;
    for (int r = 0; r < repeats; ++r) {
      const double c0 = thread_cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      ids = tok->encode(text, false, false);
      const auto t1 = std::chrono::steady_clock::now();
      cpu.push_back(thread_cpu_seconds() - c0);
      secs.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    std::sort(secs.begin(), secs.end());
    std::sort(cpu.begin(), cpu.end());
    const bool round_trip = tok->decode(ids) == text;
    const double mib = double(text.size()) / (1 << 20);
    std::printf("vocab: %s (%s, pre %s, %d tokens)\n", path.c_str(), tok->kind(), std::string(tok->pre_name()).c_str(),
                tok->n_vocab());
    std::printf("text: %.2f MiB -> %zu tokens, round trip %s\n", mib, ids.size(), round_trip ? "exact" : "FAILED");
    std::printf("encode, 1 thread, %d runs: wall best %.3f s (%.2f MiB/s), median %.3f s (%.2f MiB/s)\n", repeats,
                secs[0], mib / secs[0], secs[secs.size() / 2], mib / secs[secs.size() / 2]);
    std::printf("                        thread CPU best %.3f s (%.2f MiB/s), median %.3f s (%.2f MiB/s)\n", cpu[0],
                mib / cpu[0], cpu[cpu.size() / 2], mib / cpu[cpu.size() / 2]);
    return round_trip ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fish_bench_tokenizer: %s\n", e.what());
    return 2;
  }
}
