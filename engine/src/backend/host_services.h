// The services the engine hands to every plugin (fish_host_api in
// plugin_abi.h): logging, the host thread pool, and GGUF row conversion. One
// process-wide table that lives forever (plugins may keep the pointer).
#pragma once
#include <functional>
#include <string>

#include "fish/plugin_abi.h"

namespace fish::backend {

// The table handed to fish_plugin_query (struct_size = sizeof, this host's version).
const fish_host_api* host_api();

// The log sink shared by the loader and the plugins: with no hook, a line goes
// to stderr by verbosity (FISH_GPU_VERBOSE: 0 nothing, 1 info, warnings and
// errors, 2 debug too).
void host_log(int level, const std::string& source, const std::string& message);
void set_log_verbosity(int verbose);
int log_verbosity();

// Tests: receive every log line (whatever the verbosity) instead of stderr;
// an empty hook restores the default.
using LogHook = std::function<void(int level, const std::string& source, const std::string& message)>;
void set_log_hook(LogHook hook);

// In a child process that probes a plugin (child_process.h): log lines go
// straight to stderr (no lock or hook of the parent's) and parallel_for runs
// on the calling thread (the pool's threads stayed in the parent).
void enter_child_mode();

// "ok", "invalid argument", ... for messages.
const char* status_name(fish_status s);

}  // namespace fish::backend
