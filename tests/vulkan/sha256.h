// SHA-256 (FIPS 180-4), for checking that the committed prebuilt SPIR-V was
// generated from the current shader sources (CMake records the same hash).
#pragma once
#include <string>
#include <string_view>

namespace fish::vktest {

// Lower-case hex digest of the bytes of s.
std::string sha256_hex(std::string_view s);

}  // namespace fish::vktest
