// Python string formatting (see jinja_format.h). Numbers go through snprintf
// with the same conversions Python uses (%d %x %o %e %f %g); widths count
// code points, as Python pads characters, not bytes.
#include "chat/jinja_format.h"

#include <cmath>
#include <cstdio>

#include "chat/jinja_error.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_pystr.h"
#include "tokenizer/unicode.h"

namespace fish::chat::jinja {

namespace {

std::string pad(const std::string& s, size_t width, char align, const std::string& fill) {
  const size_t n = pystr::length(s);
  if (n >= width) return s;
  const size_t extra = width - n;
  auto fills = [&](size_t k) {
    std::string f;
    for (size_t i = 0; i < k; ++i) f += fill;
    return f;
  };
  if (align == '<') return s + fills(extra);
  if (align == '^') return fills(extra / 2) + s + fills(extra - extra / 2);
  return fills(extra) + s;
}

int64_t to_int_arg(const Value& v, char conv) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float()) {
    const double f = v.get_float();
    if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) runtime_error("cannot convert float to integer");
    return int64_t(f);
  }
  runtime_error(std::string("%") + conv + " format: a real number is required, not " + v.type_name());
}

double to_float_arg(const Value& v, char conv) {
  if (v.is_number()) return v.as_float();
  runtime_error(std::string("%") + conv + " format: a real number is required, not " + v.type_name());
}

// Python prints inf and nan as "inf"/"nan" where C may write "INF"/"-nan".
std::string c_float(const char* flags, int width, int prec, char conv, double f) {
  if (!std::isfinite(f)) {
    std::string s = std::isnan(f) ? "nan" : (f < 0 ? "-inf" : "inf");
    if (conv >= 'A' && conv <= 'Z') s = pystr::upper(s);
    if (!std::isnan(f) && f > 0) {
      if (std::string_view(flags).find('+') != std::string_view::npos) s = "+" + s;
      else if (std::string_view(flags).find(' ') != std::string_view::npos) s = " " + s;
    }
    const bool left = std::string_view(flags).find('-') != std::string_view::npos;
    return pad(s, size_t(width > 0 ? width : 0), left ? '<' : '>', " ");
  }
  std::string fmt = std::string("%") + flags + "*.*" + conv;
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, fmt.c_str(), width, prec, f);
  if (n < 0 || size_t(n) >= sizeof buf) runtime_error("formatted number too long");
  return std::string(buf, size_t(n));
}

std::string c_int(const char* flags, int width, int prec, char conv, int64_t v) {
  const std::string_view fl(flags);
  const bool alt = fl.find('#') != std::string_view::npos;
  if (conv == 'd' || conv == 'i' || (v >= 0 && !(conv == 'o' && alt))) {
    // C and Python agree here. A precision turns the 0 flag off in both, so
    // none is passed unless one was written.
    const std::string fmt = std::string("%") + flags + (prec < 0 ? "*ll" : "*.*ll") + conv;
    char buf[512];
    const int n = prec < 0 ? std::snprintf(buf, sizeof buf, fmt.c_str(), width, static_cast<long long>(v))
                           : std::snprintf(buf, sizeof buf, fmt.c_str(), width, prec, static_cast<long long>(v));
    if (n < 0 || size_t(n) >= sizeof buf) runtime_error("formatted number too long");
    return std::string(buf, size_t(n));
  }
  // Python writes a sign and the magnitude (C would print two's complement),
  // and its alternate octal form is 0o17 (C's is 017).
  const uint64_t mag = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  const int base = conv == 'o' ? 8 : 16;
  const char* digits = conv == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string d;
  uint64_t m = mag;
  do {
    d.insert(d.begin(), digits[m % uint64_t(base)]);
    m /= uint64_t(base);
  } while (m);
  while (int(d.size()) < prec) d.insert(d.begin(), '0');
  std::string head;
  if (v < 0) head.push_back('-');
  else if (fl.find('+') != std::string_view::npos) head.push_back('+');
  else if (fl.find(' ') != std::string_view::npos) head.push_back(' ');
  if (alt) head += conv == 'o' ? "0o" : (conv == 'X' ? "0X" : "0x");
  const bool left = fl.find('-') != std::string_view::npos;
  if (!left && fl.find('0') != std::string_view::npos)
    while (int(head.size() + d.size()) < width) d.insert(d.begin(), '0');
  return pad(head + d, size_t(width > 0 ? width : 0), left ? '<' : '>', " ");
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> pos;
  const DictData* named = nullptr;
  if (args.is_tuple()) pos = args.items();
  else if (args.is_dict()) named = &args.dict();
  else pos.push_back(args);
  size_t next_arg = 0;
  auto take = [&]() -> Value {
    if (next_arg >= pos.size()) runtime_error("not enough arguments for format string");
    return pos[next_arg++];
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) runtime_error("incomplete format");
    Value arg;
    bool have_arg = false;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos) runtime_error("incomplete format key");
      if (!named) runtime_error("format requires a mapping");
      const Value* v = named->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!v) runtime_error("format key '" + fmt.substr(i + 1, close - i - 1) + "' not found");
      arg = *v;
      have_arg = true;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) flags += fmt[i++];
    int width = 0, prec = -1;
    if (i < fmt.size() && fmt[i] == '*') {
      width = int(to_int_arg(take(), '*'));
      ++i;
    } else {
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') width = std::min(width * 10 + (fmt[i++] - '0'), 10000);
    }
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      prec = 0;
      if (i < fmt.size() && fmt[i] == '*') {
        prec = int(to_int_arg(take(), '*'));
        ++i;
      } else {
        while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') prec = std::min(prec * 10 + (fmt[i++] - '0'), 10000);
      }
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) runtime_error("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!have_arg) arg = take();
    const bool left = flags.find('-') != std::string::npos;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = conv == 's' ? to_str(arg) : repr(arg);
        if (prec >= 0) {
          const std::vector<size_t> off = pystr::offsets(s);
          if (size_t(prec) + 1 < off.size()) s.resize(off[size_t(prec)]);
        }
        out += pad(s, size_t(width), left ? '<' : '>', " ");
        break;
      }
      case 'c': {
        std::string s;
        if (arg.is_string() && pystr::length(arg.get_string()) == 1) s = arg.get_string();
        else if (arg.is_int()) fish::unicode::append_utf8(s, uint32_t(arg.get_int()));
        else runtime_error("%c requires int or char");
        out += pad(s, size_t(width), left ? '<' : '>', " ");
        break;
      }
      case 'd': case 'i': case 'u':
        out += c_int(flags.c_str(), width, prec, conv == 'u' ? 'd' : conv, to_int_arg(arg, conv));
        break;
      case 'o': case 'x': case 'X':
        out += c_int(flags.c_str(), width, prec, conv, to_int_arg(arg, conv));
        break;
      case 'e': case 'E': case 'f': case 'F': case 'g': case 'G':
        out += c_float(flags.c_str(), width, prec < 0 ? 6 : prec, conv, to_float_arg(arg, conv));
        break;
      default: runtime_error(std::string("unsupported format character '") + conv + "'");
    }
    check_string_size(out.size());
  }
  if (next_arg < pos.size() && !named) runtime_error("not all arguments converted during string formatting");
  return out;
}

std::string format_value(const Value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v);
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  // [[fill]align]: the fill is one character (code point).
  const std::vector<size_t> off = pystr::offsets(spec);
  if (off.size() > 2 && is_align(spec[off[1]])) {
    fill = std::string(spec.substr(0, off[1]));
    align = spec[off[1]];
    i = off[1] + 1;
  } else if (is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  char sign = '-';
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  bool alt = false;
  if (i < spec.size() && spec[i] == '#') {
    alt = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill.assign(1, '0');  // not = "0": GCC 12 misreports that (-Wrestrict)
      align = '=';
    }
    ++i;
  }
  int width = 0;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') width = std::min(width * 10 + (spec[i++] - '0'), 10000);
  char group = 0;
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) group = spec[i++];
  int prec = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    prec = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') prec = std::min(prec * 10 + (spec[i++] - '0'), 10000);
  }
  char type = 0;
  if (i < spec.size()) type = spec[i++];
  if (i != spec.size()) runtime_error("invalid format specifier '" + std::string(spec) + "'");

  std::string body;
  std::string sign_text;
  const bool numeric = v.is_number() && !(v.is_bool() && (type == 0 || type == 's'));
  if (!numeric) {
    if (type != 0 && type != 's')
      runtime_error(std::string("unknown format code '") + type + "' for object of type '" + v.type_name() + "'");
    body = to_str(v);
    if (prec >= 0) {
      const std::vector<size_t> o = pystr::offsets(body);
      if (size_t(prec) + 1 < o.size()) body.resize(o[size_t(prec)]);
    }
    return pad(body, size_t(width), align ? (align == '=' ? '<' : align) : '<', fill);
  }
  const bool as_int = (v.is_int() || v.is_bool()) && (type == 0 || type == 'd' || type == 'x' || type == 'X' ||
                                                      type == 'o' || type == 'b' || type == 'c' || type == 'n');
  if (as_int) {
    int64_t x = v.as_int();
    const bool neg = x < 0;
    uint64_t mag = neg ? uint64_t(0) - uint64_t(x) : uint64_t(x);
    if (type == 'c') {
      fish::unicode::append_utf8(body, uint32_t(mag));
    } else {
      const int base = type == 'x' || type == 'X' ? 16 : (type == 'o' ? 8 : (type == 'b' ? 2 : 10));
      const char* digits = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      std::string d;
      do {
        d.insert(d.begin(), digits[mag % uint64_t(base)]);
        mag /= uint64_t(base);
      } while (mag);
      if (group && base == 10)
        for (int k = int(d.size()) - 3; k > 0; k -= 3) d.insert(size_t(k), 1, group);
      if (alt && base != 10) d = std::string("0") + (type == 'X' ? 'X' : type) + d;
      body = d;
    }
    sign_text = neg ? "-" : (sign == '+' ? "+" : (sign == ' ' ? " " : ""));
  } else {
    if (type != 0 && std::string_view("eEfFgG%").find(type) == std::string_view::npos)
      runtime_error(std::string("unknown format code '") + type + "' for object of type '" + v.type_name() + "'");
    double f = v.as_float();
    const bool neg = std::signbit(f) && !std::isnan(f);
    f = std::fabs(f);
    if (type == 0 && prec < 0) {
      body = float_repr(f);
    } else if (type == 0) {
      body = c_float("", 0, prec == 0 ? 1 : prec, 'g', f);
      if (std::isfinite(f) && body.find_first_of(".e") == std::string::npos) body += ".0";
    } else if (type == '%') {
      body = c_float("", 0, prec < 0 ? 6 : prec, 'f', f * 100) + "%";
    } else {
      body = c_float(alt ? "#" : "", 0, prec < 0 ? 6 : prec, type, f);
    }
    if (group && std::isfinite(f)) {
      size_t int_end = body.find_first_of(".eE%");
      if (int_end == std::string::npos) int_end = body.size();
      for (int k = int(int_end) - 3; k > 0; k -= 3) body.insert(size_t(k), 1, group);
    }
    sign_text = neg ? "-" : (sign == '+' ? "+" : (sign == ' ' ? " " : ""));
  }
  if (align == '=') {
    const size_t n = pystr::length(sign_text) + pystr::length(body);
    std::string f;
    for (size_t k = n; k < size_t(width); ++k) f += fill;
    return sign_text + f + body;
  }
  return pad(sign_text + body, size_t(width), align ? align : '>', fill);
}

std::string str_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      runtime_error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) runtime_error("Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos) runtime_error("nested replacement fields are not supported");
    i = close;
    // field_name [!conversion] [:spec]
    std::string name = field, spec;
    char conv = 0;
    const size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      name = field.substr(0, colon);
    }
    const size_t bang = name.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != name.size()) runtime_error("bad conversion in format string");
      conv = name[bang + 1];
      name.resize(bang);
    }
    // The first part names an argument; then .attr and [key] accessors.
    size_t k = 0;
    while (k < name.size() && name[k] != '.' && name[k] != '[') ++k;
    const std::string head = name.substr(0, k);
    Value v;
    if (head.empty() || (head.find_first_not_of("0123456789") == std::string::npos)) {
      const size_t idx = head.empty() ? auto_index++ : size_t(std::stoul(head));
      if (idx >= args.args.size()) runtime_error("Replacement index " + std::to_string(idx) + " out of range");
      v = args.args[idx];
    } else {
      bool found = false;
      for (const auto& [kn, kv] : args.kwargs)
        if (kn == head) {
          v = kv;
          found = true;
        }
      if (!found) runtime_error("KeyError: '" + head + "'");
    }
    while (k < name.size()) {
      if (name[k] == '.') {
        size_t e = k + 1;
        while (e < name.size() && name[e] != '.' && name[e] != '[') ++e;
        v = get_attr(v, name.substr(k + 1, e - k - 1));
        k = e;
      } else {
        const size_t e = name.find(']', k);
        if (e == std::string::npos) runtime_error("Missing ']' in format string");
        const std::string key = name.substr(k + 1, e - k - 1);
        const bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = get_item(v, digits ? Value(int64_t(std::stoll(key))) : Value(key));
        k = e + 1;
      }
    }
    if (v.is_undefined()) fail_undefined(v);
    if (conv == 'r' || conv == 'a') v = Value(repr(v));
    else if (conv == 's') v = Value(to_str(v));
    else if (conv) runtime_error(std::string("Unknown conversion specifier ") + conv);
    out += format_value(v, spec);
    check_string_size(out.size());
  }
  return out;
}

}  // namespace fish::chat::jinja
