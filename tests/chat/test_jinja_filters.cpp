// Filters, tests and Python methods with exact outputs (jinja2's, in Hugging
// Face's environment), plus the errors they raise on bad input.
#include <catch2/catch.hpp>
#include <string>

#include "chat_test_util.h"

using namespace fish::test;

namespace {
const std::string kVars = R"({"l": [3, 1, 2], "s": "Hello World", "d": {"b": 2, "a": 1}, "m": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A"}, {"role": "user", "content": "U2"}]})";
}  // namespace

TEST_CASE("chat filters: string filters (trim, title, capitalize, lower, upper)", "[chat][filters]") {
  CHECK(render("{{ \" x \"|trim }}|{{ \"xxhixx\"|trim(\"x\") }}|{{ \"hello wORLD-foo\"|title }}|{{ \"hELLO\"|capitalize }}|{{ \"AbC\"|lower }}|{{ \"aBc\"|upper }}|{{ none|lower }}", kVars) ==
        "x|hi|Hello World-Foo|Hello|abc|ABC|none");
}

TEST_CASE("chat filters: length, first, last, join", "[chat][filters]") {
  CHECK(render("{{ l|length }} {{ s|length }} {{ \"Grüße\"|length }} {{ d|length }} {{ undefined_name|length }} {{ l|count }}", kVars) ==
        "3 11 5 2 0 3");
  CHECK(render("{{ l|first }} {{ l|last }} {{ s|first }} {{ d|first }} {{ []|first }}|", kVars) ==
        "3 2 H b |");
  CHECK(render("{{ l|join }} {{ l|join(\", \") }} {{ m|join(\" \", attribute=\"role\") }} {{ (\"a\", \"b\")|join(\"-\") }}", kVars) ==
        "312 3, 1, 2 system user assistant user a-b");
}

TEST_CASE("chat filters: sort, max, min, sum, unique, reverse", "[chat][filters]") {
  CHECK(render("{{ l|sort }} {{ l|sort(reverse=true) }} {{ [\"B\", \"a\", \"C\"]|sort }} {{ [\"B\", \"a\", \"C\"]|sort(case_sensitive=true) }} {{ m|sort(attribute=\"content\")|map(attribute=\"content\")|list }}", kVars) ==
        "[1, 2, 3] [3, 2, 1] ['a', 'B', 'C'] ['B', 'C', 'a'] ['A', 'S', 'U1', 'U2']");
  CHECK(render("{{ l|max }} {{ l|min }} {{ l|sum }} {{ m|map(attribute=\"content\")|max }} {{ [1.5, 2]|sum(start=10) }}", kVars) ==
        "3 1 6 U2 13.5");
  CHECK(render("{{ l|reverse|list }} {{ \"abc\"|reverse }} {{ [1, 2, 1, 3, 2]|unique|list }} {{ [\"a\", \"A\", \"b\"]|unique|list }}", kVars) ==
        "[2, 1, 3] cba [1, 2, 3] ['a', 'b']");
}

TEST_CASE("chat filters: items, dictsort, list", "[chat][filters]") {
  CHECK(render("{{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(by=\"value\", reverse=true) }} {{ d|list }} {{ s|list }}", kVars) ==
        "[('b', 2), ('a', 1)] [('a', 1), ('b', 2)] [('b', 2), ('a', 1)] ['b', 'a'] ['H', 'e', 'l', 'l', 'o', ' ', 'W', 'o', 'r', 'l', 'd']");
}

TEST_CASE("chat filters: select, reject, selectattr, rejectattr, map", "[chat][filters]") {
  CHECK(render("{{ m|selectattr(\"role\", \"equalto\", \"user\")|map(attribute=\"content\")|join(\",\") }} {{ m|rejectattr(\"role\", \"equalto\", \"user\")|map(attribute=\"role\")|list }} {{ m|selectattr(\"missing\")|list }} {{ [0, 1, 2, 3]|select(\"odd\")|list }} {{ [0, 1, 2, 3]|reject(\"odd\")|list }} {{ [0, 1, \"\", \"x\"]|select|list }}", kVars) ==
        "U1,U2 ['system', 'assistant'] [] [1, 3] [0, 2] [1, 'x']");
  CHECK(render("{{ [\"a\", \"b\"]|map(\"upper\")|list }} {{ l|map(\"string\")|join(\"+\") }} {{ m|map(attribute=\"missing\", default=\"-\")|list }} {{ [[1, 2], [3]]|map(\"length\")|list }}", kVars) ==
        "['A', 'B'] 3+1+2 ['-', '-', '-', '-'] [2, 1]");
}

TEST_CASE("chat filters: int, float, round, abs, default", "[chat][filters]") {
  CHECK(render("{{ \"3\"|int + 1 }} {{ \"3.7\"|int }} {{ \"x\"|int }} {{ \"x\"|int(5) }} {{ 3.9|int }} {{ \"0x1A\"|int(base=16) }} {{ \" 42 \"|int }} {{ \"1_000\"|int }} {{ true|int }} {{ none|int }}", kVars) ==
        "4 3 0 5 3 26 42 1000 1 0");
  CHECK(render("{{ \"2.5\"|float }} {{ \"x\"|float }} {{ 3|float }} {{ \"inf\"|float }} {{ 3.14159|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3.14159|round(2, \"floor\") }} {{ 3.1|round(0, \"ceil\") }} {{ 4|round }} {{ -3|abs }} {{ -2.5|abs }}", kVars) ==
        "2.5 0.0 3.0 inf 3.14 2.0 4.0 2.67 3.14 4.0 4 3 2.5");
  CHECK(render("{{ none|default(\"d\") }} {{ undefined_name|default(\"d\") }} {{ \"\"|default(\"d\") }} {{ \"\"|default(\"d\", true) }} {{ undefined_name|d }}| {{ 0|default(\"d\", boolean=true) }}", kVars) ==
        "None d  d | d");
}

TEST_CASE("chat filters: format and the % operator (printf-style)", "[chat][filters]") {
  CHECK(render("{{ \"%s and %s\"|format(\"a\", 1) }} {{ \"%d%%\"|format(50) }} {{ \"%.2f\"|format(3.14159) }} {{ \"%5s|%-5s|\"|format(\"a\", \"b\") }} {{ \"%x %o %X %e %g\"|format(255, 8, 255, 12345.678, 0.0001) }} {{ \"%(a)s-%(b)r\"|format(a=1, b=\"q\") }} {{ \"%05.1f\"|format(2.25) }} {{ \"%+d\"|format(5) }} {{ \"%c\"|format(65) }}", kVars) ==
        "a and 1 50% 3.14     a|b    | ff 10 FF 1.234568e+04 0.0001 1-'q' 002.2 +5 A");
  CHECK(render("{{ \"%s\" % \"x\" }} {{ \"%s-%s\" % (\"a\", \"b\") }} {{ \"%d items\" % 3 }} {{ \"%(a)s\" % {\"a\": 1} }} {{ \"%#x %#o\" % (255, 8) }}", kVars) ==
        "x a-b 3 items 1 0xff 0o10");
}

TEST_CASE("chat filters: indent, center, wordcount, escape, safe, batch, replace, string, attr", "[chat][filters]") {
  CHECK(render("{{ \"a\\nb\\n\\nc\"|indent(2) }}|{{ \"a\\nb\"|indent(2, true) }}|{{ \"a\\n\\nb\"|indent(2, blank=true) }}|{{ \"a\\nb\"|indent(\"> \") }}", kVars) ==
        "a\n  b\n\n  c|  a\n  b|a\n  \n  b|a\n> b");
  CHECK(render("{{ \"x\"|center(9) }}|{{ \"abc\"|center(6) }}|{{ \"one two  three\"|wordcount }}|{{ \"<a href='x'>&\\\"</a>\"|e }}|{{ \"<b>\"|safe }}|{{ \"<b>\"|escape }}", kVars) ==
        "    x    | abc  |3|&lt;a href=&#39;x&#39;&gt;&amp;&#34;&lt;/a&gt;|<b>|&lt;b&gt;");
  CHECK(render("{{ l|batch(2)|list }} {{ [1, 2, 3, 4, 5]|batch(2, 0)|list }} {{ s|replace(\"o\", \"0\") }} {{ s|replace(\"o\", \"0\", 1) }} {{ 17|replace(\"7\", \"1\") }} {{ l|string }} {{ 1.0|string }} {{ d|attr(\"missing\") }}|", kVars) ==
        "[[3, 1], [2]] [[1, 2], [3, 4], [5, 0]] Hell0 W0rld Hell0 World 11 [3, 1, 2] 1.0 |");
}

TEST_CASE("chat methods: str case, strip, split", "[chat][filters]") {
  CHECK(render("{{ s.upper() }} {{ s.lower() }} {{ \"hello wORLD 1st\".title() }} {{ \"hELLO\".capitalize() }} {{ s.swapcase() }} {{ \"Grüße\".upper() }} {{ \"ÀÉ\".lower() }}", kVars) ==
        "HELLO WORLD hello world Hello World 1St Hello hELLO wORLD GRÜSSE àé");
  CHECK(render("{{ \"  a b  \".strip() }}|{{ \"xxaxx\".strip(\"x\") }}|{{ \"  a \".lstrip() }}|{{ \" a  \".rstrip() }}|{{ \"\\n\\nx\\n\".lstrip(\"\\n\") }}|{{ \"a,b,,c\".split(\",\") }}|{{ \" a  b \".split() }}|{{ \"a b c\".split(\" \", 1) }}|{{ \"a b c\".rsplit(\" \", 1) }}|{{ \"a<t>b<t>c\".split(\"<t>\")[-1] }}", kVars) ==
        "a b|a|a | a|x\n|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']|c");
}

TEST_CASE("chat methods: str startswith, find, replace, join, format, predicates, padding", "[chat][filters]") {
  CHECK(render("{{ s.startswith(\"Hell\") }} {{ s.endswith(\"ld\") }} {{ s.startswith((\"x\", \"H\")) }} {{ s.startswith(\"W\", 6) }} {{ s.replace(\"o\", \"0\") }} {{ s.replace(\"o\", \"0\", 1) }} {{ s.find(\"o\") }} {{ s.rfind(\"o\") }} {{ s.find(\"z\") }} {{ s.count(\"o\") }} {{ s.index(\"W\") }}", kVars) ==
        "True True True True Hell0 W0rld Hell0 World 4 7 -1 2 6");
  CHECK(render("{{ \"-\".join([\"a\", \"b\"]) }} {{ \", \".join(l|map(\"string\")) }} {{ \"{} {}\".format(1, \"a\") }} {{ \"{0}{1}{0}\".format(\"a\", \"b\") }} {{ \"{x}!\".format(x=5) }} {{ \"{:>5}|{:<5}|{:^5}|\".format(\"a\", \"b\", \"c\") }} {{ \"{:.3f}\".format(3.14159) }} {{ \"{:05d}\".format(42) }} {{ \"{!r}\".format(\"q\") }} {{ \"{:,}\".format(1234567) }} {{ \"{{literal}}\".format() }}", kVars) ==
        "a-b 3, 1, 2 1 a aba 5!     a|b    |  c  | 3.142 00042 'q' 1,234,567 {literal}");
  CHECK(render("{{ \"123\".isdigit() }} {{ \"abc\".isalpha() }} {{ \" \\t\".isspace() }} {{ \"AB\".isupper() }} {{ \"ab\".islower() }} {{ \"ab1\".isalnum() }} {{ \"7\".zfill(3) }} {{ \"-7\".zfill(4) }} {{ \"a\".ljust(3) }}| {{ \"a\".rjust(3, \"*\") }} {{ \"a\".center(4, \"-\") }} {{ s.partition(\" \") }} {{ s.rpartition(\"o\") }} {{ \"a\\nb\\r\\nc\".splitlines() }} {{ \"pre-x\".removeprefix(\"pre-\") }}", kVars) ==
        "True True True True True True 007 -007 a  | **a -a-- ('Hello', ' ', 'World') ('Hello W', 'o', 'rld') ['a', 'b', 'c'] x");
}

TEST_CASE("chat methods: dict and list", "[chat][filters]") {
  CHECK(render("{{ d.get(\"a\") }} {{ d.get(\"zz\") }} {{ d.get(\"zz\", 9) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ l.index(1) }} {{ l.count(3) }} {{ (1, 2, 2).count(2) }}", kVars) ==
        "1 None 9 ['b', 'a'] [2, 1] [('b', 2), ('a', 1)] 1 1 2");
}

TEST_CASE("chat tests: defined, none, types, iterable, sequence, callable", "[chat][filters]") {
  CHECK(render("{{ none is none }} {{ 0 is none }} {{ x is defined }} {{ l is defined }} {{ x is undefined }} {{ s is string }} {{ 1 is string }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ d is mapping }} {{ l is mapping }}", kVars) ==
        "True False False True True True False True True True True False True True True False");
  CHECK(render("{{ l is iterable }} {{ s is iterable }} {{ d is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ l is sequence }} {{ s is sequence }} {{ 1 is sequence }} {{ d.get is callable }} {{ s is callable }}", kVars) ==
        "True True True False True True True False True False");
}

TEST_CASE("chat tests: odd, even, divisibleby, lower, upper, true, false, sameas, comparisons, in", "[chat][filters]") {
  CHECK(render("{{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ \"abc\" is lower }} {{ \"ABC\" is upper }} {{ \"aB\" is lower }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ none is sameas none }} {{ 1 is sameas 1 }}", kVars) ==
        "True False True True True False True False True False True True");
  CHECK(render("{{ 7 is equalto 7 }} {{ 7 is eq 7 }} {{ 7 is ne 7 }} {{ 7 is gt 3 }} {{ 7 is ge 7 }} {{ 7 is lt 3 }} {{ 7 is le 7 }} {{ 7 is greaterthan 3 }} {{ 7 is lessthan 3 }} {{ 2 is in l }} {{ \"ell\" is in s }} {{ \"upper\" is filter }} {{ \"nope\" is filter }} {{ \"odd\" is test }}", kVars) ==
        "True True False True True False True True False True True True False True");
  CHECK(render("{{ 3 in l }} {{ 5 not in l }} {{ \"a\" in d }} {{ \"ell\" in s }} {{ \"x\" in undefined_name }} {{ \"</think>\" in \"a</think>b\" }} {{ (1, 2) in [(1, 2)] }}", kVars) ==
        "True True True True False True True");
}

TEST_CASE("chat filters: printf-style flags, widths and precisions, and str.format specs", "[chat][filters]") {
  CHECK(render("{{ '%05d|%-5d|%5.3d|%x|%#x|%-#8o|%+.2e|%G|%10.4f|%-10s|%%' % (42, 42, 42, -255, 255, 8, 12345.678, "
               "1e-10, 3.14159, 'hi') }}") ==
        "00042|42   |  042|-ff|0xff|0o10    |+1.23e+04|1E-10|    3.1416|hi        |%");
  CHECK(render("{{ \"{:>10}|{:*^9}|{:+d}|{: d}|{:x}|{:#x}|{:o}|{:b}|{:e}|{:.2%}|{:g}|{:10.3f}|{:<6}|\".format(\"r\", "
               "\"c\", 5, 5, 255, 255, 8, 5, 1234.5, 0.256, 1e-7, 3.14159, 7) }}") ==
        "         r|****c****|+5| 5|ff|0xff|10|101|1.234500e+03|25.60%|1e-07|     3.142|7     |");
  CHECK(render("{{ \"{}\".format(1.0) }} {{ \"{:.3}\".format(1234.5678) }} {{ \"{:.3}\".format(1.0) }} "
               "{{ \"{:,.2f}\".format(1234567.891) }} {{ \"{:08.3f}\".format(-3.14159) }} {{ \"{:=+8d}\".format(42) }}") ==
        "1.0 1.23e+03 1.0 1,234,567.89 -003.142 +     42");
}

TEST_CASE("chat filters: bad arguments and unknown names are errors that say so", "[chat][filters]") {
  struct Case {
    const char* src;
    const char* message;
  };
  const Case cases[] = {
      {"{{ 1|nosuch }}", "template error at line 1, column 6: no filter named 'nosuch'"},
      {"{{ 1 is nosuch }}", "template error at line 1, column 9: no test named 'nosuch'"},
      {"{{ [1]|join(\",\", \"x\", 3) }}", "template error at line 1, column 8: filter 'join' takes at most 2 argument(s) (3 given)"},
      {"{{ \"a\"|trim(nope=1) }}", "template error at line 1, column 8: filter 'trim' got an unexpected keyword argument 'nope'"},
      {"{{ 5|length }}", "template error at line 1, column 6: object of type 'int' has no len()"},
      {"{{ 5|first }}", "template error at line 1, column 6: 'int' object is not iterable"},
      {"{{ [3, \"a\"]|sort }}", "template error at line 1, column 13: '<' not supported between instances of 'str' and 'int'"},
      {"{{ \"x\".split(\"\") }}", "template error at line 1, column 13: empty separator"},
      {"{{ \"%s %s\"|format(\"a\") }}", "template error at line 1, column 12: not enough arguments for format string"},
      {"{{ \"%s\"|format(\"a\", \"b\") }}", "template error at line 1, column 9: not all arguments converted during string formatting"},
      {"{{ \"-\".join([\"a\", 1]) }}", "template error at line 1, column 12: sequence item 1: expected str instance, int found"},
      {"{{ \"x\".casefold2 }}|{{ \"x\".encode() }}", "template error at line 1, column 34: the str method 'encode' is not supported by fish's template engine"},
      {"{{ [1].append(2) }}", "template error at line 1, column 14: access to attribute 'append' of 'list' object is unsafe."},
      {"{{ {}.update({}) }}", "template error at line 1, column 13: access to attribute 'update' of 'dict' object is unsafe."},
      {"{{ range(200000)|length }}", "template error at line 1, column 9: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
  };
  for (const Case& c : cases) {
    INFO(c.src);
    const auto f = failure(c.src);
    REQUIRE(is_runtime(f));
    CHECK(f->message == c.message);
  }
}
