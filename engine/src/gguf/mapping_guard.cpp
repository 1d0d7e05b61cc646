#include "gguf/mapping_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace fish::gguf {

namespace {

struct Slot {
  std::atomic<uintptr_t> begin{0}, end{0};  // end == 0: free
  char message[640];                        // the whole line the handler writes
  size_t message_len = 0;
};
Slot g_slots[MappingGuard::kMaxMappings];
std::mutex g_mu;  // add/remove (never taken by the handler)
struct sigaction g_previous {};
bool g_installed = false;

void on_sigbus(int sig, siginfo_t* info, void* uctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
  for (Slot& s : g_slots) {
    const uintptr_t e = s.end.load(std::memory_order_acquire);
    if (e != 0 && a >= s.begin.load(std::memory_order_relaxed) && a < e) {
      ssize_t ignored = write(STDERR_FILENO, s.message, s.message_len);
      (void)ignored;
      _exit(1);
    }
  }
  // Not ours: what was there before.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, uctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler) {
    return g_previous.sa_handler(sig);
  }
  signal(SIGBUS, SIG_DFL);
  raise(SIGBUS);
}

}  // namespace

int MappingGuard::add(const void* base, uint64_t size, const std::string& path) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_installed) {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_previous) != 0) return -1;
    g_installed = true;
  }
  for (int i = 0; i < kMaxMappings; ++i) {
    Slot& s = g_slots[i];
    if (s.end.load(std::memory_order_relaxed) != 0) continue;
    const std::string line = "fish: " + path + " changed or was truncated while in use (the model's mapping "
                             "lost its pages); stopping\n";
    s.message_len = std::min(line.size(), sizeof s.message);
    std::memcpy(s.message, line.data(), s.message_len);
    s.begin.store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
    s.end.store(reinterpret_cast<uintptr_t>(base) + size, std::memory_order_release);
    return i;
  }
  return -1;
}

void MappingGuard::remove(int slot) {
  if (slot < 0 || slot >= kMaxMappings) return;
  std::lock_guard<std::mutex> lk(g_mu);
  g_slots[slot].end.store(0, std::memory_order_release);
}

}  // namespace fish::gguf
