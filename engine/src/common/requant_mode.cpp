#include "common/requant_mode.h"

namespace fish {

bool parse_requant_mode(const std::string& t, RequantMode* out) {
  if (t == "0" || t == "off") *out = RequantMode::Off;
  else if (t == "1") *out = RequantMode::AllFq3;
  else if (t == "2") *out = RequantMode::ToQ4K;
  else if (t == "3") *out = RequantMode::Mixed;
  else if (t == "auto") *out = RequantMode::Auto;
  else return false;
  return true;
}

const char* requant_mode_name(RequantMode m) {
  switch (m) {
    case RequantMode::Off: return "0";
    case RequantMode::AllFq3: return "1";
    case RequantMode::ToQ4K: return "2";
    case RequantMode::Mixed: return "3";
    case RequantMode::Auto: return "auto";
  }
  return "?";
}

}  // namespace fish
