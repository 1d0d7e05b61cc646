// The reference plugin's view of the host: the services table handed to
// fish_plugin_query, and the plugin's internal error type.
//
// Inside the plugin, errors are thrown as Failure (status + message); every
// entry point in entry.cpp catches them and turns them into a fish_status and a
// last_error() string, so no exception ever crosses the ABI boundary.
#pragma once
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "fish/plugin_abi.h"

namespace fish::reference {

struct Failure {
  fish_status status;
  std::string message;
};

[[noreturn]] inline void fail(fish_status s, std::string msg) { throw Failure{s, std::move(msg)}; }

// Set once by fish_plugin_query; the host keeps the table alive for the whole process.
inline const fish_host_api*& host() {
  static const fish_host_api* h = nullptr;
  return h;
}

inline void log(int32_t level, const std::string& msg) {
  if (host() && host()->log) host()->log(level, "reference", msg.c_str());
}

// Bytes of one row of n elements of a GGUF type, from the host's type table.
inline uint64_t row_bytes(uint32_t type, int64_t n) {
  fish_type_info ti{};
  ti.struct_size = sizeof ti;
  if (host()->type_info(type, &ti) != FISH_OK) fail(FISH_E_UNSUPPORTED, "unknown GGUF type " + std::to_string(type));
  if (ti.block_size <= 0 || n <= 0 || n % ti.block_size != 0)
    fail(FISH_E_INVALID_ARGUMENT, std::string("a row of ") + std::to_string(n) + " elements is not a whole number of " +
                                      (ti.name ? ti.name : "?") + " blocks of " + std::to_string(ti.block_size));
  return uint64_t(n / ti.block_size) * uint64_t(ti.type_size);
}

inline std::string type_name(uint32_t type) {
  fish_type_info ti{};
  ti.struct_size = sizeof ti;
  if (host()->type_info(type, &ti) == FISH_OK && ti.name) return ti.name;
  return "type " + std::to_string(type);
}

// Runs fn(begin, end) over [0, n) on the host's threads. A Failure thrown by fn
// on any thread is carried back and rethrown here (never through the host).
template <class Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  struct Ctx {
    explicit Ctx(Fn* f) : fn(f) {}
    Fn* fn;
    std::mutex mu;
    bool failed = false;
    Failure first{FISH_OK, ""};
    void record(Failure f) {
      std::lock_guard<std::mutex> lk(mu);
      if (!failed) first = std::move(f);
      failed = true;
    }
  } ctx(&fn);
  auto tramp = [](void* p, int64_t b, int64_t e, int32_t) {
    auto* c = static_cast<Ctx*>(p);
    try {
      (*c->fn)(b, e);
    } catch (const Failure& f) {
      c->record(f);
    } catch (const std::bad_alloc&) {
      c->record(Failure{FISH_E_OUT_OF_MEMORY, "out of host memory in a worker"});
    } catch (...) {
      c->record(Failure{FISH_E_INTERNAL, "unexpected exception in a worker"});
    }
  };
  host()->parallel_for(n, grain, tramp, &ctx);
  if (ctx.failed) throw ctx.first;
}

}  // namespace fish::reference
