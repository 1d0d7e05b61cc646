// A shared model loaded through the C API for a test: ../shared/models/<file>
// with the given parameters; the test fails there, with the loader's message,
// when it cannot be loaded.
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include "fish/fish.h"
#include "test_paths.h"

namespace fish::test {
inline fish_model* require_model(const std::string& file, const fish_model_params& p) {
  fish_error* err = nullptr;
  fish_model* m = fish_model_load(model_path(file).c_str(), &p, &err);
  INFO(file << ": " << (err ? fish_error_message(err) : ""));
  fish_error_free(err);
  REQUIRE(m);
  return m;
}
}  // namespace fish::test
