// fish serve's tool calls alone: the family each real chat template teaches,
// the reply parser on exact strings per family (several calls, text before,
// malformed calls kept as text, what streaming holds back), the request's
// tool fields and their 400s, the forced-call schema, and the conversation's
// past calls rendered by the real templates as they expect them.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fish/fish.h"
#include "fish/fish_chat.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/python_call.h"
#include "serve/tool_call_parser.h"
#include "serve/tool_format.h"
#include "serve/tool_request.h"
#include "test_paths.h"
#include "test_skip.h"

using namespace fish::serve;
using ojson = nlohmann::ordered_json;

namespace {

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

void collect(std::vector<ToolEvent> evs, Parsed* p) {
  for (ToolEvent& e : evs) {
    if (e.is_call) p->calls.push_back(std::move(e.call));
    else p->content += e.content;
  }
}

// The whole reply at once, as the non-streaming answer parses it.
Parsed parse(ToolFamily f, const std::string& text, size_t max_calls = SIZE_MAX, bool start_in_call = false,
             const std::vector<std::string>& names = {}) {
  ToolCallParser p(f, max_calls, start_in_call, names);
  Parsed out;
  collect(p.push(text), &out);
  collect(p.finish(), &out);
  return out;
}

// The reply cut into pieces at the given offsets, as a stream parses it.
Parsed parse_pieces(ToolFamily f, const std::string& text, std::vector<size_t> cuts, size_t max_calls = SIZE_MAX,
                    const std::vector<std::string>& names = {}) {
  ToolCallParser p(f, max_calls, false, names);
  Parsed out;
  size_t at = 0;
  cuts.push_back(text.size());
  for (size_t c : cuts) {
    collect(p.push(text.substr(at, c - at)), &out);
    at = c;
  }
  collect(p.finish(), &out);
  return out;
}

// A reply cut at random places, 200 ways, parses as the whole of it does.
void agrees_when_cut(ToolFamily f, const std::string& text, const std::vector<std::string>& names = {}) {
  const Parsed whole = parse(f, text, SIZE_MAX, false, names);
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i)
      if (rng() % 4 == 0) cuts.push_back(i);
    const Parsed s = parse_pieces(f, text, cuts, SIZE_MAX, names);
    INFO(text << " round " << round);
    CHECK(s.content == whole.content);
    REQUIRE(s.calls.size() == whole.calls.size());
    for (size_t k = 0; k < s.calls.size(); ++k) {
      CHECK(s.calls[k].name == whole.calls[k].name);
      CHECK(s.calls[k].arguments == whole.calls[k].arguments);
    }
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return in ? ss.str() : std::string();
}

bool is_call_id(const std::string& id) {
  if (id.size() != 29 || id.rfind("call_", 0) != 0) return false;
  for (size_t i = 5; i < id.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(id[i]))) return false;
  return true;
}

// A template file rendered with the C API, as fish serve renders a request.
std::string render(const std::string& template_file, const ojson& input, int* status = nullptr) {
  fish_chat_template* t = nullptr;
  fish_error* err = nullptr;
  REQUIRE(fish_chat_template_load(template_file.c_str(), 0, &t, &err) == FISH_CHAT_OK);
  const std::string in = input.dump();
  char* out = nullptr;
  size_t n = 0;
  const int st = fish_chat_template_render_json(t, in.data(), in.size(), &out, &n, &err);
  std::string text = st == FISH_CHAT_OK ? std::string(out, n) : std::string(fish_error_message(err));
  if (st == FISH_CHAT_OK) fish_free(out);
  else fish_error_free(err);
  fish_chat_template_free(t);
  if (status) *status = st;
  else REQUIRE(st == FISH_CHAT_OK);
  return text;
}

// A chat request body through fish serve's request path, adapted to the
// template's family: the template input it renders.
ojson template_input(const std::string& template_file, const std::string& body) {
  ParsedRequest pr;
  auto e = parse_chat_request(ojson::parse(body), fish_sampler_default_params(), true, &pr);
  if (e) FAIL(e->message);
  adapt_tool_messages(detect_tool_family(slurp(template_file)), pr.template_input["messages"]);
  pr.template_input["bos_token"] = "<s>";
  pr.template_input["eos_token"] = "</s>";
  pr.template_input["now"] = "2026-12-01T12:00:00";
  return pr.template_input;
}

const char* kWeatherTool = R"({"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]}}})";

}  // namespace

TEST_CASE("tool calls: the family is told from the real templates' text", "[serve][tools][unit]") {
  const std::string dir = fish::test::shared_path("models/templates/");
  if (slurp(dir + "Qwen-Qwen2.5-7B-Instruct.jinja").empty()) FISH_SKIP("no shared templates at " + dir);
  const std::vector<std::pair<const char*, ToolFamily>> want = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFamily::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolFamily::kHermes},
      {"Qwen-QwQ-32B.jinja", ToolFamily::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolFamily::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolFamily::kLlama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolFamily::kMistral},
      {"ibm-granite-granite-3.3-2B-Instruct.jinja", ToolFamily::kGranite},
      {"google-gemma-2-2b-it.jinja", ToolFamily::kNone},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ToolFamily::kNone},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", ToolFamily::kNone},
  };
  for (const auto& [file, family] : want) {
    const std::string src = slurp(dir + file);
    REQUIRE_FALSE(src.empty());
    INFO(file);
    CHECK(tool_family_name(detect_tool_family(src)) == std::string(tool_family_name(family)));
  }
  // ChatML alone (the fallback) teaches no format.
  CHECK(detect_tool_family("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}") ==
        ToolFamily::kNone);
}

TEST_CASE("tool calls: Hermes blocks (Qwen2.5, Qwen3, QwQ)", "[serve][tools][unit]") {
  const ToolFamily H = ToolFamily::kHermes;
  Parsed p = parse(H,
                   "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
                   "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>");
  CHECK(p.content == "Let me check.");
  REQUIRE(p.calls.size() == 2);
  CHECK(p.calls[0].name == "get_weather");
  CHECK(p.calls[0].arguments == R"({"city":"Paris","days":2})");
  CHECK(is_call_id(p.calls[0].id));
  CHECK(p.calls[1].name == "get_time");
  CHECK(p.calls[1].arguments == "{}");
  CHECK(p.calls[0].id != p.calls[1].id);

  // The model's key order stays; an arguments string holding an object is that object.
  p = parse(H, "<tool_call>\n{\"arguments\": {\"b\": 1, \"a\": [true, null]}, \"name\": \"f\"}\n</tool_call>");
  CHECK(p.content.empty());
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == R"({"b":1,"a":[true,null]})");
  p = parse(H, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": \\\"}\\\"}\"}</tool_call>");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == R"({"x":"}"})");

  // Qwen3 / QwQ think first: that text is content.
  p = parse(H, "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
               "{\"city\": \"Oslo\"}}\n</tool_call>");
  CHECK(p.content == "<think>\nThe user wants weather.\n</think>");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == R"({"city":"Oslo"})");

  // The closing tag missing at the very end (a forced call ends with its object): taken.
  p = parse(H, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.content.empty());
  // Text after the block is content too (the whitespace next to the call is not).
  p = parse(H, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\nDone.");
  CHECK(p.calls.size() == 1);
  CHECK(p.content == "Done.");
  // No tools parsed for a plain reply.
  p = parse(H, "Hello there, <b>friend</b>.");
  CHECK(p.calls.empty());
  CHECK(p.content == "Hello there, <b>friend</b>.");
}

TEST_CASE("tool calls: a malformed call stays text, marker and all", "[serve][tools][unit]") {
  const ToolFamily H = ToolFamily::kHermes;
  for (const std::string bad : {
           "<tool_call>\n{\"name\": 1, \"arguments\": {}}\n</tool_call>",             // name not a string
           "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",        // arguments not an object
           "<tool_call>\nnot json at all\n</tool_call>",                               // no object
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": tru}}\n</tool_call>",  // not JSON
           "<tool_call>\n{\"name\": \"f\", \"argu",                                     // cut off
           "<tool_call>{\"name\": \"f\", \"arguments\": {}} and then more text",          // no closing tag, more text
           "<tool_call>",                                                               // a marker alone
           "Text, \n <tool_call>oops",                                                  // whitespace before it kept
       }) {
    INFO(bad);
    const Parsed p = parse(H, bad);
    CHECK(p.calls.empty());
    CHECK(p.content == bad);
  }
  // A bad block, then a good one: the bad stays text, the good is a call.
  const Parsed p = parse(H, "<tool_call>oops</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>");
  CHECK(p.content == "<tool_call>oops</tool_call>");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "g");
  // Nesting past 128 levels is never parsed: text.
  const std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(200, '[') +
                           std::string(200, ']') + "}}</tool_call>";
  CHECK(parse(H, deep).calls.empty());
  CHECK(parse(H, deep).content == deep);
}

TEST_CASE("tool calls: streaming holds back what may open a call, and agrees with the whole reply", "[serve][tools][unit]") {
  const ToolFamily H = ToolFamily::kHermes;
  ToolCallParser p(H);
  Parsed out;
  std::vector<ToolEvent> evs = p.push("Hello <tool");
  REQUIRE(evs.size() == 1);
  CHECK(evs[0].content == "Hello");  // " <tool" may open a call
  CHECK(p.push("_call>\n{\"name\"").empty());
  CHECK(p.push(": \"f\", \"arguments\": {\"q\": 1}}").empty());  // whole, but the closing tag may follow
  CHECK(p.push("\n</tool_").empty());
  evs = p.push("call>");
  REQUIRE(evs.size() == 1);
  CHECK(evs[0].is_call);
  CHECK(evs[0].call.arguments == R"({"q":1})");
  CHECK(p.finish().empty());

  // A prefix of the marker that turns out to be something else goes out.
  ToolCallParser q(H);
  CHECK(q.push("a <to")[0].content == "a");
  CHECK(q.push("ast")[0].content == " <toast");
  CHECK(q.push(" and ")[0].content == " and");  // trailing whitespace waits
  CHECK(q.finish()[0].content == " ");           // the end, no call: it goes out

  // Every way of cutting a reply gives what the whole reply gives.
  const std::vector<std::pair<ToolFamily, std::string>> replies = {
      {H, "Sure. <tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"<tool_call>\"}}\n</tool_call>\n"
          "<tool_call>bad</tool_call> tail <tool"},
      {ToolFamily::kLlama3, "  <|python_tag|>{\"name\": \"a\", \"parameters\": {\"k\": [1, {\"z\": \"]}\"}]}} after"},
      {ToolFamily::kLlama3, "<|pyth not a tag {\"name\": \"a\"}"},
      {ToolFamily::kMistral, "pre [TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"c\": 1}}] post"},
      {ToolFamily::kGranite, "<|tool_call|>[{\"name\": \"a\", \"arguments\": {\"s\": \"\\\"]\"}}]"},
  };
  for (const auto& [f, text] : replies) agrees_when_cut(f, text);
}

TEST_CASE("tool calls: the JSON scan reads each byte once and skips brackets in strings", "[serve][tools][unit]") {
  JsonScan scan;
  std::string s = "xx{\"a\": \"}]\\\"{\", \"b\": [";
  scan.reset(2);
  CHECK(scan.feed(s) == std::string::npos);
  s += "{}, [1]";
  CHECK(scan.feed(s) == std::string::npos);
  CHECK(scan.deepest() == 3);
  s += "]} tail {";
  const size_t end = scan.feed(s);
  CHECK(s.substr(2, end - 2) == "{\"a\": \"}]\\\"{\", \"b\": [{}, [1]]}");
  s += "}]]";
  CHECK(scan.feed(s) == end);  // found: the same answer after more text
}

TEST_CASE("tool calls: a long call streamed in small pieces is read in linear time", "[serve][tools][unit]") {
  // 400 KB of arguments in 2-byte pieces: rescanning the call on every piece
  // would read ~40 GB; once each, 400 KB.
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"" + std::string(400000, 'x') +
                           "\"}}</tool_call>";
  std::vector<size_t> cuts;
  for (size_t i = 2; i < text.size(); i += 2) cuts.push_back(i);
  const Parsed p = parse_pieces(ToolFamily::kHermes, text, cuts);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments.size() == 400000 + 8);
  CHECK(p.content.empty());
}

TEST_CASE("tool calls: Llama 3.1 / 3.2 JSON objects", "[serve][tools][unit]") {
  const ToolFamily L = ToolFamily::kLlama3;
  Parsed p = parse(L, R"({"name": "get_weather", "parameters": {"city": "Paris"}})");
  CHECK(p.content.empty());
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "get_weather");
  CHECK(p.calls[0].arguments == R"({"city":"Paris"})");
  p = parse(L, "\n <|python_tag|>{\"name\": \"f\", \"arguments\": {\"a\": 1}}");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == R"({"a":1})");
  CHECK(p.content.empty());
  // Only at the start of the reply: a call after text is text.
  const std::string later = R"(The call is {"name": "f", "parameters": {}})";
  CHECK(parse(L, later).calls.empty());
  CHECK(parse(L, later).content == later);
  // A JSON reply that is no call is content, whole.
  CHECK(parse(L, R"({"answer": 42})").content == R"({"answer": 42})");
  CHECK(parse(L, R"({"answer": 42})").calls.empty());
  CHECK(parse(L, R"({"name": "f", "parameters": {)").content == R"({"name": "f", "parameters": {)");

  // Streaming: a reply that starts with text goes out at once; one that may be a call waits.
  ToolCallParser s(L);
  CHECK(s.push(" ").empty());
  CHECK(s.push("<|py").empty());
  CHECK(s.push("thon_tag|>{\"na").empty());
  const auto evs = s.push("me\": \"f\", \"parameters\": {}} ok");
  REQUIRE(evs.size() == 2);
  CHECK(evs[0].is_call);
  CHECK(evs[1].content == "ok");
  ToolCallParser t(L);
  CHECK(t.push("Hi")[0].content == "Hi");
}

TEST_CASE("tool calls: Llama 3.1 built-in call syntax NAME.call(key=value) read as Python reads it", "[serve][tools][unit]") {
  auto args = [](const std::string& s) {
    auto c = parse_python_call(s, 128);
    return c ? c->name + " " + c->arguments.dump() : std::string("none");
  };
  CHECK(args(R"(brave_search.call(query="weather in Paris"))") == R"(brave_search {"query":"weather in Paris"})");
  CHECK(args(" \n wolfram_alpha.call(query='x^2 = 4')\n") == R"(wolfram_alpha {"query":"x^2 = 4"})");
  CHECK(args("f.call()") == "f {}");
  // Every kind of value, spaces and newlines between tokens, a trailing comma; the model's key order.
  CHECK(args("search.call(query='it\\'s', n=3, x=-1.5e2, y=.5, z=5., big=1_000, on=True, off=False, no=None,\n"
             "  j=[true, false, null], tags=[\"a\", 'b',], opts={\"k\": [1, {}], 'k': 2, \"m\": []}, )") ==
        R"(search {"query":"it's","n":3,"x":-150.0,"y":0.5,"z":5.0,"big":1000,"on":true,"off":false,"no":null,)"
        R"("j":[true,false,null],"tags":["a","b"],"opts":{"k":2,"m":[]}})");
  // Python's escapes: \xhh \uXXXX \UXXXXXXXX octal, the single-letter ones, a
  // line continuation; an unknown escape (\q, \N{...}) keeps its backslash; a
  // lone surrogate is U+FFFD.
  CHECK(args(R"(f.call(q="\x41\u00e9\U0001F600\101\0\t\"\\\q\N{DASH}\ud800 a\
b"))") == "f {\"q\":\"A\xC3\xA9\xF0\x9F\x98\x80" "A\\u0000\\t\\\"\\\\\\\\q\\\\N{DASH}\xEF\xBF\xBD ab\"}");
  // Triple quotes (newlines inside), raw and u prefixes, literals side by side joined.
  CHECK(args("python.call(code=\"\"\"import sys\nprint('a \"b\"')\"\"\", p=r\"C:\\new\\\"\", u=u'x' \"y\"\n 'z')") ==
        R"j(python {"code":"import sys\nprint('a \"b\"')","p":"C:\\new\\\"","u":"xyz"})j");
  // No call: positional arguments, a repeated keyword, a variable, an
  // expression, text after the call, a string left open or broken by a line
  // end, a short \x, hex, a tuple, a key that is no string, no ".call(".
  for (const char* bad : {
           R"(f.call("x"))", "f.call(a=1, a=2)", "f.call(q=query)", "f.call(q=1+2)", "f.call(q=1) and more",
           "f.call(q=\"open)", "f.call(q=\"a\nb\")", R"(f.call(q="\x4"))", "f.call(q=0x1F)", "f.call(q=(1, 2))",
           "f.call(q={1: 2})", "f(q=1)", "f.calls(q=1)", "f.call(q=1", "1f.call(q=1)", "f.call(q=1,,)", "f.call(,)",
           "f.call(q=[1 2])", "f.call(q=-)", "f.call(q=1.2.3)", "f.call(q=\"\\U00110000\")", "f.call(q=1)x"}) {
    INFO(bad);
    CHECK(args(bad) == "none");
  }
  // Names: a Python identifier of 64 at most (OpenAI's limit).
  CHECK(args(std::string(64, 'n') + ".call()") == std::string(64, 'n') + " {}");
  CHECK(args(std::string(65, 'n') + ".call()") == "none");
  // Nesting: the call is level 1, so 127 lists fit in 128 and 128 do not.
  CHECK(args("f.call(q=" + std::string(127, '[') + std::string(127, ']') + ")") != "none");
  CHECK(args("f.call(q=" + std::string(128, '[') + std::string(128, ']') + ")") == "none");
  CHECK(parse_python_call("f.call(q=[[1]])", 2) == std::nullopt);

  // The head, as a stream grows: maybe, then yes or no, from the first 70 bytes at most.
  CHECK(python_call_head("") == CallHead::kMaybe);
  CHECK(python_call_head("brave_sea") == CallHead::kMaybe);
  CHECK(python_call_head("brave_search.ca") == CallHead::kMaybe);
  CHECK(python_call_head("brave_search.call(") == CallHead::kYes);
  CHECK(python_call_head("brave_search.call(query=\"x") == CallHead::kYes);
  CHECK(python_call_head("import sys") == CallHead::kNo);
  CHECK(python_call_head("print(1)") == CallHead::kNo);
  CHECK(python_call_head("x.cell(") == CallHead::kNo);
  CHECK(python_call_head("9x.call(") == CallHead::kNo);
  CHECK(python_call_head(std::string(64, 'n')) == CallHead::kMaybe);
  CHECK(python_call_head(std::string(65, 'n')) == CallHead::kNo);
}

TEST_CASE("tool calls: Llama 3.1 built-in tools and the code interpreter after <|python_tag|>", "[serve][tools][unit]") {
  const ToolFamily L = ToolFamily::kLlama3;
  const std::vector<std::string> weather = {"get_weather"};
  // brave_search / wolfram_alpha, as Meta's format writes them: a call, with or without them among the tools.
  for (const auto& names : {std::vector<std::string>{}, weather, std::vector<std::string>{"brave_search", "python"}}) {
    Parsed p = parse(L, "<|python_tag|>brave_search.call(query=\"weather in \\\"Paris\\\"\")", SIZE_MAX, false, names);
    CHECK(p.content.empty());
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].name == "brave_search");
    CHECK(p.calls[0].arguments == R"({"query":"weather in \"Paris\""})");
    CHECK(is_call_id(p.calls[0].id));
  }
  Parsed p = parse(L, " \n<|python_tag|> wolfram_alpha.call(query='x^2 = 4', steps=True)\n");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "wolfram_alpha");
  CHECK(p.calls[0].arguments == R"({"query":"x^2 = 4","steps":true})");
  CHECK(p.content.empty());
  // The JSON object after the tag is still a JSON call.
  p = parse(L, R"(<|python_tag|>{"name": "python", "parameters": {"code": "1"}})", SIZE_MAX, false, {"python"});
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == R"({"code":"1"})");

  // Code after the tag: a call of the request's code tool, "python" first, then "code_interpreter".
  const std::string code = "<|python_tag|>import sys\nprint(sys.version)\n";
  for (const auto& [names, tool] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"get_weather", "python"}, "python"},
           {{"code_interpreter"}, "code_interpreter"},
           {{"code_interpreter", "python"}, "python"}}) {
    p = parse(L, code, SIZE_MAX, false, names);
    CHECK(p.content.empty());
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].name == tool);
    CHECK(p.calls[0].arguments == R"j({"code":"import sys\nprint(sys.version)"})j");
  }
  // No code tool: the code is text, the tag with it.
  for (const auto& names : {std::vector<std::string>{}, weather}) {
    p = parse(L, code, SIZE_MAX, false, names);
    CHECK(p.calls.empty());
    CHECK(p.content == code);
  }
  // With a code tool, NAME.call(...) naming none of the tools is code
  // (subprocess.call), and so is a call with more after it; one naming a tool is that call.
  const std::vector<std::string> py = {"python", "brave_search"};
  p = parse(L, "<|python_tag|>subprocess.call(args=[\"ls\"])", SIZE_MAX, false, py);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "python");
  CHECK(p.calls[0].arguments == R"j({"code":"subprocess.call(args=[\"ls\"])"})j");
  p = parse(L, "<|python_tag|>brave_search.call(query=\"a\")\nprint(1)", SIZE_MAX, false, py);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "python");
  CHECK(p.calls[0].arguments == R"j({"code":"brave_search.call(query=\"a\")\nprint(1)"})j");
  p = parse(L, "<|python_tag|>brave_search.call(query=\"a\")", SIZE_MAX, false, py);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "brave_search");
  p = parse(L, "<|python_tag|>python.call(code=\"print(1)\")", SIZE_MAX, false, py);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "python");
  CHECK(p.calls[0].arguments == R"j({"code":"print(1)"})j");

  // Malformed without a code tool: text, the tag included; a tag with nothing after it is text even with one.
  for (const std::string bad : {"<|python_tag|>brave_search.call(\"x\")", "<|python_tag|>brave_search.call(query=\"x\") Done.",
                                "<|python_tag|>brave_search.call(query=\"x", "<|python_tag|>print(\"hi\")"}) {
    INFO(bad);
    p = parse(L, bad, SIZE_MAX, false, weather);
    CHECK(p.calls.empty());
    CHECK(p.content == bad);
  }
  p = parse(L, "<|python_tag|>\n", SIZE_MAX, false, py);
  CHECK(p.calls.empty());
  CHECK(p.content == "<|python_tag|>\n");
  // Only at the start of the reply, after the tag.
  for (const std::string text : {"brave_search.call(query=\"x\")", "Sure. <|python_tag|>brave_search.call(query=\"x\")"}) {
    p = parse(L, text, SIZE_MAX, false, py);
    CHECK(p.calls.empty());
    CHECK(p.content == text);
  }
  // Other families: the syntax means nothing.
  CHECK(parse(ToolFamily::kHermes, "<|python_tag|>brave_search.call(query=\"x\")").content ==
        "<|python_tag|>brave_search.call(query=\"x\")");

  // Streaming: a call or code is held to the end of the reply; without a code
  // tool, text that cannot open NAME.call( goes out as soon as that is clear.
  ToolCallParser s(L, SIZE_MAX, false, weather);
  CHECK(s.push("<|python_tag|>").empty());
  CHECK(s.push("brave_search.ca").empty());
  CHECK(s.push("ll(query=\"x\")").empty());
  auto evs = s.finish();
  REQUIRE(evs.size() == 1);
  CHECK(evs[0].is_call);
  CHECK(evs[0].call.arguments == R"({"query":"x"})");
  ToolCallParser t(L, SIZE_MAX, false, weather);
  CHECK(t.push("<|python_tag|>import").empty());
  evs = t.push(" sys");
  REQUIRE(evs.size() == 1);
  CHECK(evs[0].content == "<|python_tag|>import sys");
  CHECK(t.push("\nprint(1)")[0].content == "\nprint(1)");
  CHECK(t.finish().empty());
  ToolCallParser u(L, SIZE_MAX, false, {"python"});
  CHECK(u.push("<|python_tag|>import sys").empty());
  CHECK(u.push("\nprint(1)\n").empty());
  evs = u.finish();
  REQUIRE(evs.size() == 1);
  CHECK(evs[0].call.name == "python");
  CHECK(evs[0].call.arguments == R"j({"code":"import sys\nprint(1)"})j");
  // Every way of cutting these replies gives what the whole reply gives.
  agrees_when_cut(L, "  <|python_tag|>brave_search.call(query=\"it's \\\"x\\\"\", n=[1, {'a': None}])\n", weather);
  agrees_when_cut(L, "<|python_tag|>brave_search.call(query=\"x\") tail", weather);
  agrees_when_cut(L, "<|python_tag|>import os\nos.listdir('.')\n", weather);
  agrees_when_cut(L, "<|python_tag|>import os\nos.listdir('.')\n", {"python"});
  agrees_when_cut(L, "<|python_tag|>subprocess.call(args=[\"ls\"])", {"code_interpreter"});
}

TEST_CASE("tool calls: a call naming a function that is none of the tools is still a call, as llama-server reports it", "[serve][tools][unit]") {
  const std::vector<std::string> tools = {"get_weather"};
  for (const auto& [f, text] : std::vector<std::pair<ToolFamily, std::string>>{
           {ToolFamily::kHermes, "<tool_call>\n{\"name\": \"send_email\", \"arguments\": {\"to\": \"a@b.c\"}}\n</tool_call>"},
           {ToolFamily::kLlama3, "{\"name\": \"send_email\", \"parameters\": {\"to\": \"a@b.c\"}}"},
           {ToolFamily::kLlama3, "<|python_tag|>send_email.call(to=\"a@b.c\")"},
           {ToolFamily::kMistral, "[TOOL_CALLS][{\"name\": \"send_email\", \"arguments\": {\"to\": \"a@b.c\"}}]"},
           {ToolFamily::kGranite, "<|tool_call|>[{\"name\": \"send_email\", \"arguments\": {\"to\": \"a@b.c\"}}]"}}) {
    INFO(text);
    std::vector<size_t> every;  // streamed a byte at a time
    for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
    for (const Parsed& p : {parse(f, text, SIZE_MAX, false, tools), parse_pieces(f, text, every, SIZE_MAX, tools)}) {
      CHECK(p.content.empty());
      REQUIRE(p.calls.size() == 1);
      CHECK(p.calls[0].name == "send_email");
      CHECK(p.calls[0].arguments == R"({"to":"a@b.c"})");
      CHECK(is_call_id(p.calls[0].id));
    }
    agrees_when_cut(f, text, tools);
  }
  // Beside a call of a known one: both, in the model's order.
  const Parsed p = parse(ToolFamily::kHermes,
                         "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>\n"
                         "<tool_call>{\"name\": \"send_email\", \"arguments\": {}}</tool_call>",
                         SIZE_MAX, false, tools);
  REQUIRE(p.calls.size() == 2);
  CHECK(p.calls[0].name == "get_weather");
  CHECK(p.calls[1].name == "send_email");
  CHECK(p.content.empty());
  // The one name fish would supply itself, the code tool's, it never makes
  // up: code after the tag with no such tool offered stays text.
  const Parsed code = parse(ToolFamily::kLlama3, "<|python_tag|>print(1)", SIZE_MAX, false, tools);
  CHECK(code.calls.empty());
  CHECK(code.content == "<|python_tag|>print(1)");
}

TEST_CASE("tool calls: Mistral Nemo and Granite 3.3 arrays", "[serve][tools][unit]") {
  Parsed p = parse(ToolFamily::kMistral,
                   "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abcDEF123\"}, "
                   "{\"name\": \"b\", \"arguments\": {}}]");
  CHECK(p.content.empty());
  REQUIRE(p.calls.size() == 2);
  CHECK(p.calls[0].id == "abcDEF123");  // the model's own id
  CHECK(p.calls[0].arguments == R"({"x":1})");
  CHECK(p.calls[1].name == "b");
  CHECK(is_call_id(p.calls[1].id));
  // An object where the array belongs, or an element that is no call: text.
  const std::string obj = R"([TOOL_CALLS]{"name": "a", "arguments": {}})";
  CHECK(parse(ToolFamily::kMistral, obj).calls.empty());
  CHECK(parse(ToolFamily::kMistral, obj).content == obj);
  const std::string elem = R"([TOOL_CALLS][{"name": "a", "arguments": {}}, 5])";
  CHECK(parse(ToolFamily::kMistral, elem).content == elem);
  CHECK(parse(ToolFamily::kMistral, "[TOOL_CALLS][]").content == "[TOOL_CALLS][]");

  p = parse(ToolFamily::kGranite, "Sure.<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]");
  CHECK(p.content == "Sure.");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == R"({"city":"Rome"})");
  CHECK(is_call_id(p.calls[0].id));  // Granite's ids are never the model's
  // Other families' markers mean nothing here.
  CHECK(parse(ToolFamily::kGranite, "<tool_call>{}</tool_call>").content == "<tool_call>{}</tool_call>");
  CHECK(parse(ToolFamily::kNone, "<tool_call>{\"name\": \"f\"}</tool_call>").calls.empty());
}

TEST_CASE("tool calls: parallel_tool_calls false takes one call, a forced reply starts inside one", "[serve][tools][unit]") {
  const std::string two = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", "
                          "\"arguments\": {}}</tool_call>";
  Parsed p = parse(ToolFamily::kHermes, two, 1);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "a");
  CHECK(p.content == "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>");
  p = parse(ToolFamily::kMistral, "[TOOL_CALLS][{\"name\": \"a\"}, {\"name\": \"b\"}]", 1);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == "{}");  // no arguments: an empty object
  CHECK(p.content.empty());

  // tool_choice required / named: the marker is in the prompt; the reply is the call's JSON.
  p = parse(ToolFamily::kHermes, "{\"name\": \"f\", \"arguments\": {\"a\": \"b\"}}", SIZE_MAX, true);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == R"({"a":"b"})");
  p = parse(ToolFamily::kGranite, "[{\"name\": \"f\", \"arguments\": {}}]", SIZE_MAX, true);
  CHECK(p.calls.size() == 1);
  // Cut off by max_tokens: the text alone (no marker the model did not write).
  p = parse(ToolFamily::kHermes, "{\"name\": \"f\", \"argu", SIZE_MAX, true);
  CHECK(p.calls.empty());
  CHECK(p.content == "{\"name\": \"f\", \"argu");
}

TEST_CASE("tool calls: request fields, and a 400 naming each bad one", "[serve][tools][unit]") {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  auto err = [&](const std::string& rest) {
    ParsedRequest pr;
    auto e = parse_chat_request(ojson::parse("{" + msgs + ", " + rest + "}"), fish_sampler_default_params(), true, &pr);
    REQUIRE(e.has_value());
    CHECK(e->status == 400);
    return *e;
  };
  CHECK(err(R"("tools": {})").param == "tools");
  CHECK(err(R"("tools": [{"type": "function"}])").message == "'tools[0].function' must be an object");
  CHECK(err(R"("tools": [{"type": "retrieval", "function": {"name": "f"}}])").message ==
        "'tools[0]' must be an object with 'type': 'function'");
  CHECK(err(R"("tools": [{"type": "function", "function": {"name": ""}}])").message ==
        "'tools[0].function.name' must be a non-empty string");
  CHECK(err(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}])").param == "tools");
  const std::string tools = std::string(R"("tools": [)") + kWeatherTool + "]";
  ApiError e = err(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})");
  CHECK(e.param == "tool_choice");
  CHECK(e.message == "'tool_choice' names the function 'nope', which is not one of 'tools'");
  CHECK(err(tools + R"(, "tool_choice": "sometimes")").param == "tool_choice");
  CHECK(err(tools + R"(, "tool_choice": {"type": "function"})").param == "tool_choice");
  CHECK(err(R"("tool_choice": "required")").message == "'tool_choice' forces a tool call but the request has no 'tools'");
  CHECK(err(tools + R"(, "parallel_tool_calls": 1)").param == "parallel_tool_calls");
  {
    ParsedRequest pr;
    auto e2 = parse_chat_request(ojson::parse(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant",
        "content": null, "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}]})"), fish_sampler_default_params(),
                                 true, &pr);
    REQUIRE(e2);
    CHECK(e2->param == "messages[1].tool_calls");
    CHECK(e2->message == "'messages[1].tool_calls[0].function.arguments' must be a JSON string (or an object)");
  }

  ParsedRequest pr;
  REQUIRE_FALSE(parse_chat_request(ojson::parse("{" + msgs + ", " + tools + R"(, "parallel_tool_calls": false})"),
                                   fish_sampler_default_params(), true, &pr));
  CHECK(pr.tools.choice == ToolRequest::Choice::kAuto);
  CHECK(pr.tools.parse());
  CHECK(pr.tools.max_calls() == 1);
  CHECK(pr.template_input["tools"][0]["function"]["name"] == "get_weather");
  CHECK(pr.tools.names() == std::vector<std::string>{"get_weather"});
  // "none": the template is not given the tools and nothing is parsed.
  ParsedRequest none;
  REQUIRE_FALSE(parse_chat_request(ojson::parse("{" + msgs + ", " + tools + R"(, "tool_choice": "none"})"),
                                   fish_sampler_default_params(), true, &none));
  CHECK_FALSE(none.tools.parse());
  CHECK_FALSE(none.template_input.contains("tools"));
  ParsedRequest named;
  REQUIRE_FALSE(parse_chat_request(
      ojson::parse("{" + msgs + ", " + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})"),
      fish_sampler_default_params(), true, &named));
  CHECK(named.tools.forced());
  CHECK(named.tools.name == "get_weather");
}

TEST_CASE("tool calls: past calls reach the template as it expects them", "[serve][tools][unit]") {
  // OpenAI's shape: arguments as a JSON string. Templates write them with tojson: an object.
  ojson msg = ojson::parse(R"({"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "f", "arguments": "{\"city\": \"Paris\", \"n\": 2}"}}, {"id": "call_2", "type": "function",
      "function": {"name": "g", "arguments": "not json"}}]})");
  REQUIRE_FALSE(normalize_tool_calls(msg, 1));
  CHECK(msg["tool_calls"][0]["function"]["arguments"].dump() == R"({"city":"Paris","n":2})");
  CHECK(msg["tool_calls"][1]["function"]["arguments"] == "not json");  // left as it came
  ojson none = ojson::parse(R"({"role": "assistant", "content": "x", "tool_calls": null})");
  REQUIRE_FALSE(normalize_tool_calls(none, 0));
  CHECK_FALSE(none.contains("tool_calls"));  // Llama 3.1 tests 'tool_calls' in message

  CHECK(mistral_tool_call_id("abcDEF123") == "abcDEF123");
  const std::string m = mistral_tool_call_id("call_z3BO7fVWm4nXraSUdZ9SOZP9");
  CHECK(m.size() == 9);
  CHECK(m == mistral_tool_call_id("call_z3BO7fVWm4nXraSUdZ9SOZP9"));
  CHECK(m != mistral_tool_call_id("call_other"));

  const std::string dir = fish::test::shared_path("models/templates/");
  if (slurp(dir + "Qwen-Qwen2.5-7B-Instruct.jinja").empty()) FISH_SKIP("no shared templates at " + dir);
  const std::string body = std::string(R"({"messages": [{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_abc", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_abc", "content": "{\"temp\": 20}"}], "tools": [)") + kWeatherTool + "]}";
  // The rendered prompts, written out from what each template's own code says it emits.
  const std::string qwen = render(dir + "Qwen-Qwen2.5-7B-Instruct.jinja", template_input(dir + "Qwen-Qwen2.5-7B-Instruct.jinja", body));
  CHECK_THAT(qwen, Catch::Contains("<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
                                   "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
                                   "<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response><|im_end|>\n"
                                   "<|im_start|>assistant\n"));
  const std::string qwen3 = render(dir + "Qwen-Qwen3-0.6B.jinja", template_input(dir + "Qwen-Qwen3-0.6B.jinja", body));
  CHECK_THAT(qwen3, Catch::Contains("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                    "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"));
  const std::string llama = render(dir + "meta-llama-Llama-3.1-8B-Instruct.jinja",
                                   template_input(dir + "meta-llama-Llama-3.1-8B-Instruct.jinja", body));
  CHECK_THAT(llama, Catch::Contains("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", "
                                    "\"parameters\": {\"city\": \"Paris\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>"
                                    "\n\n\"{\\\"temp\\\": 20}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"));
  const std::string id = mistral_tool_call_id("call_abc");
  const std::string mistral = render(dir + "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                                     template_input(dir + "mistralai-Mistral-Nemo-Instruct-2407.jinja", body));
  CHECK_THAT(mistral, Catch::Contains("[/INST][TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
                                      "\"id\": \"" + id + "\"}]</s>[TOOL_RESULTS]{\"content\": {\"temp\": 20}, \"call_id\": \"" +
                                      id + "\"}[/TOOL_RESULTS]"));
  const std::string granite = render(dir + "ibm-granite-granite-3.3-2B-Instruct.jinja",
                                     template_input(dir + "ibm-granite-granite-3.3-2B-Instruct.jinja", body));
  CHECK_THAT(granite, Catch::Contains("<|start_of_role|>assistant<|end_of_role|><|tool_call|>[{\"name\": \"get_weather\", "
                                      "\"arguments\": {\"city\": \"Paris\"}}]<|end_of_text|>\n<|start_of_role|>tool<|end_of_role|>"
                                      "{\"temp\": 20}<|end_of_text|>\n"));
}

TEST_CASE("tool calls: the shared tool cases render byte for byte through the request path", "[serve][tools][unit]") {
  const std::string dir = fish::test::shared_path("models/templates/");
  const std::string cases_text = slurp(dir + "cases.json");
  if (cases_text.empty()) FISH_SKIP("no shared templates at " + dir);
  int n = 0;
  for (const ojson& c : ojson::parse(cases_text)) {
    if (!c["inputs"].contains("tools") || !c.contains("expected")) continue;
    const ojson& in = c["inputs"];
    ojson body{{"messages", in["messages"]}, {"tools", in["tools"]}};
    const std::string file = dir + c["template"].get<std::string>();
    ojson input = template_input(file, body.dump());
    input["add_generation_prompt"] = in["add_generation_prompt"];
    INFO(c["template"].get<std::string>());
    CHECK(render(file, input) == c["expected"].get<std::string>());
    ++n;
  }
  CHECK(n == 10);
}

TEST_CASE("tool calls: a forced call's schema", "[serve][tools][unit]") {
  const ojson weather = ojson::parse(kWeatherTool);
  const ojson noargs = ojson::parse(R"({"type": "function", "function": {"name": "ping"}})");
  const ojson refs = ojson::parse(R"({"type": "function", "function": {"name": "r", "parameters": {"type": "object",
      "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"enum": [1, 2], "default": {"$ref": "#/x"}}}}}})");
  CHECK(forced_tool_schema(ToolFamily::kHermes, {&weather, &noargs, &refs}, true).dump() ==
        R"({"anyOf":[{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":)"
        R"({"type":"object","properties":{"city":{"type":"string","description":"City name"}},"required":["city"]}},)"
        R"("required":["name","arguments"]},)"
        R"({"type":"object","properties":{"name":{"const":"ping"},"arguments":{}},"required":["name","arguments"]},)"
        R"({"type":"object","properties":{"name":{"const":"r"},"arguments":{"type":"object","properties":{"p":)"
        R"({"$ref":"#/anyOf/2/properties/arguments/$defs/P"}},"$defs":{"P":{"enum":[1,2],"default":{"$ref":"#/x"}}}}},)"
        R"("required":["name","arguments"]}]})");
  const std::string llama = forced_tool_schema(ToolFamily::kLlama3, {&weather}, true).dump();
  CHECK_THAT(llama, Catch::Contains(R"("required":["name","parameters"])"));
  const ojson arr = forced_tool_schema(ToolFamily::kMistral, {&refs}, false);
  CHECK(arr["minItems"] == 1);
  CHECK(arr["maxItems"] == 1);
  CHECK(arr["items"]["anyOf"][0]["properties"]["arguments"]["properties"]["p"]["$ref"] ==
        "#/items/anyOf/0/properties/arguments/$defs/P");
  CHECK_FALSE(forced_tool_schema(ToolFamily::kGranite, {&refs}, true).contains("maxItems"));

  // The engine takes them; a parameters schema it does not enforce is a 400 naming the tool.
  ToolRequest tr;
  tr.tools = ojson::array({weather, noargs, refs});
  tr.choice = ToolRequest::Choice::kRequired;
  std::string schema;
  for (ToolFamily f : {ToolFamily::kHermes, ToolFamily::kLlama3, ToolFamily::kMistral, ToolFamily::kGranite}) {
    INFO(tool_family_name(f));
    CHECK_FALSE(forced_schema_for(f, tr, &schema));
  }
  tr.tools.push_back(ojson::parse(R"({"type": "function", "function": {"name": "zip", "parameters": {"type": "object",
      "properties": {"code": {"type": "string", "pattern": "^[0-9]+$"}}}}})"));
  auto e = forced_schema_for(ToolFamily::kHermes, tr, &schema);
  REQUIRE(e);
  CHECK(e->param == "tools");
  CHECK_THAT(e->message, Catch::StartsWith("'tools[3].function.parameters': keyword 'pattern' at /properties/code/pattern"));
  // Named: the other tools are not in the schema, so their keywords do not matter.
  tr.choice = ToolRequest::Choice::kNamed;
  tr.name = "get_weather";
  REQUIRE_FALSE(forced_schema_for(ToolFamily::kHermes, tr, &schema));
  CHECK(schema.find("zip") == std::string::npos);
  CHECK(schema.find("ping") == std::string::npos);
}

TEST_CASE("tool calls: answers in OpenAI's shapes", "[serve][tools][unit]") {
  ResponseMeta meta{true, "chatcmpl-1", "m.gguf", 1700000000};
  ToolCall c{"call_x", "get_weather", R"({"city":"Paris"})"};
  const nlohmann::json full = full_response(meta, "", "tool_calls", Usage{}, nullptr, {c});
  const nlohmann::json& msg = full["choices"][0]["message"];
  CHECK(msg["content"].is_null());
  CHECK(msg["role"] == "assistant");
  CHECK(msg["tool_calls"].dump() ==
        R"([{"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"call_x","type":"function"}])");
  CHECK(full["choices"][0]["finish_reason"] == "tool_calls");
  // Text beside calls stays; without calls nothing changes.
  CHECK(full_response(meta, "hm", "tool_calls", Usage{}, nullptr, {c})["choices"][0]["message"]["content"] == "hm");
  CHECK_FALSE(full_response(meta, "", "stop", Usage{}, nullptr)["choices"][0]["message"].contains("tool_calls"));
  CHECK(tool_call_head_delta(2, c).dump() ==
        R"({"tool_calls":[{"function":{"arguments":"","name":"get_weather"},"id":"call_x","index":2,"type":"function"}]})");
  CHECK(tool_call_args_delta(2, c).dump() == R"({"tool_calls":[{"function":{"arguments":"{\"city\":\"Paris\"}"},"index":2}]})");
  const nlohmann::json chunk = delta_chunk(meta, tool_call_args_delta(0, c), "", nullptr, nullptr);
  CHECK(chunk["object"] == "chat.completion.chunk");
  CHECK(chunk["choices"][0]["finish_reason"].is_null());
}
