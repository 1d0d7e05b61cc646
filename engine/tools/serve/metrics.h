// /metrics: fish serve's counters in Prometheus' text format (0.0.4).
#pragma once
#include <cstdint>
#include <string>

#include "serve/serve_counters.h"

namespace fish::serve {

std::string prometheus_text(const ServeCounters& c, int32_t n_slots);

}  // namespace fish::serve
