// A model file is read through a read-only mapping; if the file shrinks while
// it is mapped (truncated, rewritten in place), touching the lost pages raises
// SIGBUS. MappingGuard turns that signal, for addresses inside a registered
// mapping, into one clear line on stderr ("PATH changed or was truncated while
// in use") and exit status 1, instead of a silent death by signal. A SIGBUS
// anywhere else goes to the handler that was installed before (or the default).
//
// The registry is a fixed table of atomics, so the handler reads it without
// locks (async-signal-safe); at most kMaxMappings files are guarded at once
// (more are simply not guarded).
#pragma once
#include <cstdint>
#include <string>

namespace fish::gguf {

class MappingGuard {
 public:
  static constexpr int kMaxMappings = 64;
  // Guards [base, base + size) for the file at path; returns a slot for remove(), or -1.
  static int add(const void* base, uint64_t size, const std::string& path);
  static void remove(int slot);
};

}  // namespace fish::gguf
