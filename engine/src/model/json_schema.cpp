#include "model/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "common/error.h"
#include "model/json_schema_prefix.h"

namespace fish {

using nlohmann::json;
using Node = JsonSchema::Node;

namespace {

// Keywords that describe without constraining: skipped.
const std::set<std::string> kAnnotations = {
    "title",    "description", "default",    "examples",         "$schema",         "$id",
    "$comment", "format",      "readOnly",   "writeOnly",        "deprecated",      "contentMediaType",
    "contentEncoding", "discriminator", "$defs", "definitions"};
// Keywords enforced (the rest are refused).
const std::set<std::string> kEnforced = {"type",  "properties", "required", "additionalProperties", "items",
                                         "minItems", "maxItems", "minLength", "maxLength", "enum",
                                         "const", "anyOf",      "oneOf",    "$ref"};

// A JSON pointer one level down (RFC 6901 escapes).
std::string child_path(const std::string& path, const std::string& key) {
  std::string out = path + "/";
  for (const char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string where(const std::string& path) { return path.empty() ? "the root" : path; }

// The deepest nesting of arrays and objects in a JSON text (brackets in
// strings not counted); stops counting past `limit`. nlohmann::json reads,
// copies, dumps and frees values recursively: a deep text is refused first.
int text_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

class SchemaCompiler {
 public:
  SchemaCompiler(const json& doc, JsonSchema& out) : doc_(doc), out_(out) {}

  void run(const std::shared_ptr<const JsonSchema>& self) {
    out_.root_ = ref_target("");
    while (!todo_.empty()) {  // $ref targets, each compiled once, without recursion between them
      const auto [node, pointer] = todo_.back();
      todo_.pop_back();
      const json* target = nullptr;
      try {
        const json::json_pointer p(pointer);
        if (doc_.contains(p)) target = &doc_.at(p);
      } catch (const json::exception&) {
      }
      if (!target) fail("'$ref' '#" + pointer + "' (at " + ref_from_[node] + ") names no part of the schema");
      compile_into(node, *target, pointer, 0);
    }
    expand();
    filter_enums(self);
    prune();
  }

 private:
  [[noreturn]] static void fail(const std::string& msg) { throw Error(msg); }

  int32_t new_node(const std::string& path) {
    if (out_.nodes_.size() >= JsonSchema::kMaxNodes)
      fail("the schema is too large (more than " + std::to_string(JsonSchema::kMaxNodes) + " subschemas)");
    out_.nodes_.emplace_back();
    out_.nodes_.back().path = path;
    return int32_t(out_.nodes_.size() - 1);
  }

  // The node any value matches (true, an absent "items", ...).
  int32_t any() {
    if (any_ < 0) {
      any_ = new_node("");
      Node& n = out_.nodes_[size_t(any_)];
      n.additional = any_, n.items = any_;
    }
    return any_;
  }

  // The node of the subschema at a pointer, compiled later from the work list.
  int32_t ref_target(const std::string& pointer, const std::string& from = "") {
    const auto it = refs_.find(pointer);
    if (it != refs_.end()) return it->second;
    const int32_t n = new_node(pointer);
    refs_[pointer] = n;
    ref_from_[n] = from;
    todo_.emplace_back(n, pointer);
    return n;
  }

  int32_t compile(const json& s, const std::string& path, int depth) {
    const int32_t n = new_node(path);
    compile_into(n, s, path, depth);
    return n;
  }

  // minItems / maxItems / minLength / maxLength: a count (an integral number
  // >= 0, 2.0 too), clamped to 32 bits.
  static uint32_t count_value(const json& s, const char* key, const std::string& path) {
    const json& v = s[key];
    if (!v.is_number() || !(v.get<double>() >= 0) || std::floor(v.get<double>()) != v.get<double>())
      fail(std::string("'") + key + "' at " + child_path(path, key) + " must be a non-negative integer");
    const double x = v.get<double>();
    return x >= double(UINT32_MAX) ? UINT32_MAX : uint32_t(x);
  }

  void compile_into(int32_t idx, const json& s, const std::string& path, int depth) {
    if (depth > JsonSchema::kMaxSchemaDepth)
      fail("the schema nests deeper than " + std::to_string(JsonSchema::kMaxSchemaDepth) + " levels at " + path);
    Node n;
    n.path = path;
    if (s.is_boolean()) {
      if (s.get<bool>()) n.kind = Node::Kind::Union, n.alts = {any()};
      else n.kind = Node::Kind::Union;  // false: no alternative, no value
      out_.nodes_[size_t(idx)] = std::move(n);
      return;
    }
    if (!s.is_object()) fail("the schema at " + where(path) + " must be an object or a boolean");
    std::vector<std::string> combinators, validators;
    for (const auto& [k, v] : s.items()) {
      if (kAnnotations.count(k) || k.rfind("x-", 0) == 0) continue;
      if (!kEnforced.count(k)) fail("keyword '" + k + "' at " + child_path(path, k) + " is not supported");
      (k == "$ref" || k == "anyOf" || k == "oneOf" ? combinators : validators).push_back(k);
    }
    if (!combinators.empty()) {
      // Alternatives beside other keywords would need their intersection.
      const std::string& c = combinators[0];
      if (combinators.size() > 1 || !validators.empty())
        fail("'" + c + "' at " + child_path(path, c) + " beside '" +
             (combinators.size() > 1 ? combinators[1] : validators[0]) +
             "' is not supported (put the other keywords inside each alternative)");
      n.kind = Node::Kind::Union;
      const json& v = s[c];
      if (c == "$ref") {
        if (!v.is_string()) fail("'$ref' at " + child_path(path, c) + " must be a string");
        const std::string ref = v.get<std::string>();
        if (ref.empty() || ref[0] != '#' || (ref.size() > 1 && ref[1] != '/'))
          fail("'$ref' '" + ref + "' at " + child_path(path, c) +
               ": only references inside the schema (\"#\", \"#/$defs/Name\", ...) are supported");
        n.alts = {ref_target(ref.substr(1), child_path(path, c))};
      } else {
        if (!v.is_array() || v.empty()) fail("'" + c + "' at " + child_path(path, c) + " must be a non-empty array");
        for (size_t i = 0; i < v.size(); ++i)
          n.alts.push_back(compile(v[i], child_path(child_path(path, c), std::to_string(i)), depth + 1));
      }
      out_.nodes_[size_t(idx)] = std::move(n);
      return;
    }
    if (s.contains("enum") || s.contains("const")) {
      // The values as texts; the other keywords (a "type" beside them) are
      // compiled into a node of their own that filter_enums checks each against.
      std::set<std::string> lits;
      try {
        if (s.contains("enum")) {
          const json& e = s["enum"];
          if (!e.is_array()) fail("'enum' at " + child_path(path, "enum") + " must be an array");
          for (const json& x : e) lits.insert(x.dump());
        }
        if (s.contains("const")) {
          const std::string c = s["const"].dump();
          if (s.contains("enum") && !lits.count(c)) lits.clear();
          else lits = {c};
        }
      } catch (const json::exception& e) {
        fail("'enum' / 'const' at " + where(path) + ": " + e.what());
      }
      n.kind = Node::Kind::Enum;
      n.literals.assign(lits.begin(), lits.end());  // std::string orders by unsigned bytes, as narrowing needs
      const int32_t base = new_node(path);
      enums_.emplace_back(idx, base);
      out_.nodes_[size_t(idx)] = std::move(n);
      compile_value(base, s, path, depth);
      return;
    }
    compile_value(idx, s, path, depth);
  }

  // The typed keywords of a schema object into node idx (a Value node).
  void compile_value(int32_t idx, const json& s, const std::string& path, int depth) {
    Node n;
    n.path = path;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (!t.is_string() && !(t.is_array() && !t.empty()))
        fail("'type' at " + child_path(path, "type") + " must be a type name or a non-empty array of them");
      n.types = 0;
      for (const json& x : t.is_array() ? t : json::array({t})) {
        static const std::map<std::string, uint8_t> names = {
            {"null", JsonSchema::kNull},     {"boolean", JsonSchema::kBoolean}, {"integer", JsonSchema::kInteger},
            {"number", JsonSchema::kNumber}, {"string", JsonSchema::kString},   {"array", JsonSchema::kArray},
            {"object", JsonSchema::kObject}};
        const auto it = x.is_string() ? names.find(x.get<std::string>()) : names.end();
        if (it == names.end()) fail("'type' at " + child_path(path, "type") + ": " + x.dump() + " is not a JSON type");
        n.types |= it->second;
      }
    }
    // Objects.
    std::vector<std::tuple<std::string, int32_t, uint8_t>> props;  // literal, node, required
    std::set<std::string> required;
    const bool has_props = s.contains("properties");
    if (has_props) {
      const json& p = s["properties"];
      const std::string pp = child_path(path, "properties");
      if (!p.is_object()) fail("'properties' at " + pp + " must be an object");
      for (const auto& [k, v] : p.items()) props.emplace_back(json(k).dump(), compile(v, child_path(pp, k), depth + 1), 0);
    }
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) fail("'required' at " + child_path(path, "required") + " must be an array of strings");
      for (const json& x : r) {
        if (!x.is_string()) fail("'required' at " + child_path(path, "required") + " must be an array of strings");
        required.insert(x.get<std::string>());
      }
    }
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean()) n.additional = a.get<bool>() ? any() : -1;
      else n.additional = compile(a, child_path(path, "additionalProperties"), depth + 1);
    } else {
      n.additional = has_props ? -1 : any();  // see json_schema.h: absent beside "properties" means no other keys
    }
    for (const std::string& r : required) {
      const std::string lit = json(r).dump();
      auto it = std::find_if(props.begin(), props.end(), [&](const auto& p) { return std::get<0>(p) == lit; });
      if (it == props.end()) {
        // A required key the properties do not list: written under the other
        // keys' schema, any value when additionalProperties is absent, never
        // (-1: no object is valid) when other keys are forbidden.
        const bool absent = !s.contains("additionalProperties");
        props.emplace_back(lit, absent ? any() : n.additional, 0);
        it = props.end() - 1;
      }
      std::get<2>(*it) = 1;
    }
    std::sort(props.begin(), props.end());
    for (const auto& [lit, node, req] : props) {
      n.props.push_back(lit);
      n.prop_node.push_back(node);
      n.prop_required.push_back(req);
      n.n_required += req;
    }
    // Arrays.
    if (s.contains("items")) {
      const json& i = s["items"];
      if (i.is_array())
        fail("'items' at " + child_path(path, "items") + " as an array (tuple validation) is not supported");
      n.items = compile(i, child_path(path, "items"), depth + 1);
    } else {
      n.items = any();
    }
    if (s.contains("minItems")) n.min_items = count_value(s, "minItems", path);
    if (s.contains("maxItems")) n.max_items = count_value(s, "maxItems", path);
    // Strings.
    if (s.contains("minLength")) n.min_length = count_value(s, "minLength", path);
    if (s.contains("maxLength")) n.max_length = count_value(s, "maxLength", path);
    out_.nodes_[size_t(idx)] = std::move(n);
  }

  // Each node's expansion: the Value / Enum nodes reachable through Union
  // edges, in the order written, each once (a breadth-first walk per Union
  // node with a visit stamp: no recursion, cycles add nothing).
  void expand() {
    auto& nodes = out_.nodes_;
    std::vector<uint32_t> stamp(nodes.size(), 0);
    uint32_t round = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].kind != Node::Kind::Union) {
        nodes[i].expansion = {int32_t(i)};
        continue;
      }
      ++round;
      std::vector<int32_t> queue = {int32_t(i)}, found;
      stamp[i] = round;
      for (size_t q = 0; q < queue.size(); ++q) {
        for (const int32_t a : nodes[size_t(queue[q])].alts) {
          if (stamp[size_t(a)] == round) continue;
          stamp[size_t(a)] = round;
          if (nodes[size_t(a)].kind == Node::Kind::Union) {
            queue.push_back(a);
          } else {
            found.push_back(a);
            if (found.size() > JsonSchema::kMaxAlternatives)
              fail("the schema at " + where(nodes[i].path) + " allows more than " +
                   std::to_string(JsonSchema::kMaxAlternatives) + " alternatives for one value (anyOf / oneOf / $ref)");
          }
        }
      }
      nodes[i].expansion = std::move(found);
    }
  }

  // enum / const beside other keywords: the values those keywords refuse go.
  // Inner enums first (nodes are numbered as compiled, inner ones later),
  // as an outer value may hold an inner one.
  void filter_enums(const std::shared_ptr<const JsonSchema>& self) {
    for (auto it = enums_.rbegin(); it != enums_.rend(); ++it) {
      std::vector<std::string>& lits = out_.nodes_[size_t(it->first)].literals;
      std::vector<std::string> kept;
      for (const std::string& lit : lits) {
        JsonSchemaPrefix p(self, it->second);
        if (p.scan(lit) && p.complete()) kept.push_back(lit);
      }
      lits = std::move(kept);
    }
  }

  // Which nodes some finite value satisfies (a least fixed point), then every
  // way into the others removed, so that the recognizer never starts what it
  // cannot finish. The root must be satisfiable.
  void prune() {
    auto& nodes = out_.nodes_;
    std::vector<uint8_t> ok(nodes.size(), 0);
    const auto satisfied = [&](int32_t i) { return i >= 0 && ok[size_t(i)]; };
    const auto types_ok = [&](const Node& n) {
      uint8_t t = n.types & (JsonSchema::kNull | JsonSchema::kBoolean | JsonSchema::kInteger | JsonSchema::kNumber);
      if ((n.types & JsonSchema::kString) && n.min_length <= n.max_length) t |= JsonSchema::kString;
      if ((n.types & JsonSchema::kArray) && n.min_items <= n.max_items && (n.min_items == 0 || satisfied(n.items)))
        t |= JsonSchema::kArray;
      if (n.types & JsonSchema::kObject) {
        bool all = true;
        for (size_t p = 0; p < n.props.size() && all; ++p) all = !n.prop_required[p] || satisfied(n.prop_node[p]);
        if (all) t |= JsonSchema::kObject;
      }
      return uint8_t(t);
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (ok[i]) continue;
        const Node& n = nodes[i];
        bool now = false;
        if (n.kind == Node::Kind::Enum) now = !n.literals.empty();
        else if (n.kind == Node::Kind::Union) now = std::any_of(n.expansion.begin(), n.expansion.end(), satisfied);
        else now = types_ok(n) != 0;
        if (now) ok[i] = 1, changed = true;
      }
    }
    const Node& root = nodes[size_t(out_.root_)];
    if (!ok[size_t(out_.root_)]) {
      if (root.kind == Node::Kind::Union && root.expansion.empty())
        fail("the schema at the root describes no value: its $ref / anyOf / oneOf never reach a schema of a value "
             "(a reference to itself, or false)");
      fail("no JSON value satisfies the schema (an empty enum, minItems > maxItems, minLength > maxLength, a "
           "required key that cannot be written, or a required part that recurses without end)");
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      Node& n = nodes[i];
      if (n.kind == Node::Kind::Value) {
        n.types = types_ok(n);
        for (int32_t& p : n.prop_node)
          if (!satisfied(p)) p = -1;
        if (!satisfied(n.additional)) n.additional = -1;
        if (!satisfied(n.items)) n.items = -1;
      }
      std::erase_if(n.expansion, [&](int32_t e) { return !ok[size_t(e)]; });
    }
  }

  const json& doc_;
  JsonSchema& out_;
  std::map<std::string, int32_t> refs_;                 // pointer -> its node
  std::map<int32_t, std::string> ref_from_;             // node -> the first $ref to it (for messages)
  std::vector<std::pair<int32_t, std::string>> todo_;   // $ref targets to compile
  std::vector<std::pair<int32_t, int32_t>> enums_;      // enum node, node of the keywords beside it
  int32_t any_ = -1;
};

std::shared_ptr<const JsonSchema> JsonSchema::compile(std::string_view text) {
  if (text_depth(text, kMaxTextDepth) > kMaxTextDepth)
    throw Error("the schema nests arrays and objects deeper than " + std::to_string(kMaxTextDepth) + " levels");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double (1e999)
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at ...": the part after "] "
    const size_t at = what.find("] ");
    throw Error("the schema is not valid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)));
  }
  auto out = std::make_shared<JsonSchema>();
  try {
    SchemaCompiler(doc, *out).run(out);
  } catch (const json::exception& e) {  // a name or value nlohmann::json cannot write back
    throw Error(std::string("the schema: ") + e.what());
  }
  return out;
}

}  // namespace fish
