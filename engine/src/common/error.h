// fish::Error: the engine's one exception type. Inside the engine a load or input
// error is thrown with a message that names the file/field and what is wrong; the
// C API and plugin boundaries turn it into a status code and a message.
#pragma once
#include <stdexcept>
#include <string>

namespace fish {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace fish
