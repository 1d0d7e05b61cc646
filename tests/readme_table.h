// The variable names a README's configuration table lists: every `NAME` in the
// first cell of the rows starting "| `FISH_" under the heading `heading`
// (until the next heading). Tests compare it with a parser's variable_names().
#pragma once
#include <fstream>
#include <set>
#include <string>

namespace fish::test {

inline std::set<std::string> readme_table_variables(const std::string& path, const std::string& heading) {
  std::ifstream f(path);
  std::set<std::string> names;
  std::string line;
  bool in_table = false;
  while (std::getline(f, line)) {
    if (line.rfind("#", 0) == 0) in_table = line == heading;
    if (!in_table || line.rfind("| `FISH_", 0) != 0) continue;
    const std::string cell = line.substr(0, line.find(" |", 2));
    for (size_t a = cell.find('`'); a != std::string::npos; a = cell.find('`', cell.find('`', a + 1) + 1))
      names.insert(cell.substr(a + 1, cell.find('`', a + 1) - a - 1));
  }
  return names;
}

}  // namespace fish::test
