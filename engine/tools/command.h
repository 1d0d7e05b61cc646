// The `fish` sub-commands register themselves: each cmd_<name>.cpp holds one
//   static const fish::cli::Command reg{"name", "one-line help", &cmd_name};
// main.cpp dispatches on argv[1]; the command gets argv[1..] (argv[0] = its name).
#pragma once
#include <string>
#include <vector>

namespace fish::cli {

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  const char* help;
  CommandFn fn;
  Command(const char* n, const char* h, CommandFn f);
};

const std::vector<const Command*>& commands();

}  // namespace fish::cli
