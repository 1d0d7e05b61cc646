// The constrained-output flags of fish run and fish chat: --json (JSON mode,
// one JSON object) and --json-schema FILE (one JSON value valid under the
// JSON Schema in FILE), and putting them on a sampler.
#pragma once
#include <string>

#include "args.h"
#include "cli_model.h"
#include "fish/fish.h"

namespace fish::cli {

struct JsonFlags {
  bool json = false;        // --json
  bool has_schema = false;  // --json-schema FILE
  std::string schema;       // FILE's text
  bool on() const { return json || has_schema; }
  // Constrains s (anew: the text starts over); false with *error set.
  bool apply(fish_sampler* s, const fish_model* m, std::string* error) const {
    if (!on()) return true;
    fish_error* err = nullptr;
    const int st = has_schema ? fish_sampler_constrain_json_schema(s, m, schema.c_str(), &err)
                              : fish_sampler_constrain_json(s, m, &err);
    if (st == 0) return true;
    *error = std::string(has_schema ? "--json-schema: " : "--json: ") + fish_error_message(err);
    fish_error_free(err);
    return false;
  }
};

// Parses the flags, or exits 2 naming the problem: a schema fish does not
// enforce is refused here, before the model loads.
inline JsonFlags parse_json_flags(Args& a) {
  JsonFlags f;
  f.json = a.flag(nullptr, "--json");
  std::string path;
  if (a.value(nullptr, "--json-schema", path)) {
    if (f.json) a.fail("--json and --json-schema: choose one");
    f.has_schema = true;
    f.schema = read_text_file(a, "--json-schema", path);
    fish_error* err = nullptr;
    if (fish_json_schema_check(f.schema.c_str(), &err) != 0) {
      const std::string why = fish_error_message(err);
      fish_error_free(err);
      a.fail("--json-schema " + path + ": " + why);
    }
  }
  return f;
}

}  // namespace fish::cli
