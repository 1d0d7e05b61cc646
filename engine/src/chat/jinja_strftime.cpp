// Dates for strftime_now (see jinja_strftime.h).
#include "chat/jinja_strftime.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "chat/jinja_error.h"

namespace fish::chat::jinja {

namespace {

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(int y, int m) {
  static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : d[m - 1];
}

// Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days
// inverse of the well-known era algorithm).
long days_from_civil(int y, int m, int d) {
  y -= m <= 2;
  const long era = (y >= 0 ? y : y - 399) / 400;
  const long yoe = y - era * 400;
  const long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool read_int(std::string_view s, size_t& i, size_t n, int& out) {
  if (i + n > s.size()) return false;
  int v = 0;
  for (size_t k = 0; k < n; ++k) {
    const char c = s[i + k];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  i += n;
  return true;
}

}  // namespace

std::optional<DateTime> parse_iso_datetime(std::string_view s) {
  DateTime t;
  size_t i = 0;
  if (!read_int(s, i, 4, t.year) || i >= s.size() || s[i++] != '-' || !read_int(s, i, 2, t.month) ||
      i >= s.size() || s[i++] != '-' || !read_int(s, i, 2, t.day))
    return std::nullopt;
  if (t.year < 1 || t.month < 1 || t.month > 12 || t.day < 1 || t.day > days_in_month(t.year, t.month))
    return std::nullopt;
  if (i < s.size() && (s[i] == 'T' || s[i] == 't' || s[i] == ' ')) {
    ++i;
    if (!read_int(s, i, 2, t.hour) || i >= s.size() || s[i++] != ':' || !read_int(s, i, 2, t.minute))
      return std::nullopt;
    if (i < s.size() && s[i] == ':') {
      ++i;
      if (!read_int(s, i, 2, t.second)) return std::nullopt;
      if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
        ++i;
        int digits = 0, us = 0;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
          if (digits < 6) us = us * 10 + (s[i] - '0');
          ++digits;
          ++i;
        }
        if (digits == 0) return std::nullopt;
        for (int k = digits; k < 6; ++k) us *= 10;
        t.microsecond = us;
      }
    }
    if (t.hour > 23 || t.minute > 59 || t.second > 59) return std::nullopt;
  }
  // An optional zone, accepted and ignored.
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    ++i;
    int hh = 0, mm = 0;
    if (!read_int(s, i, 2, hh)) return std::nullopt;
    if (i < s.size() && s[i] == ':') ++i;
    if (i < s.size() && !read_int(s, i, 2, mm)) return std::nullopt;
    if (hh > 23 || mm > 59) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return t;
}

DateTime local_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t tt = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&tt, &tm);
  DateTime t;
  t.year = tm.tm_year + 1900;
  t.month = tm.tm_mon + 1;
  t.day = tm.tm_mday;
  t.hour = tm.tm_hour;
  t.minute = tm.tm_min;
  t.second = tm.tm_sec;
  t.microsecond =
      int(std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
  return t;
}

std::string py_strftime(std::string_view fmt, const DateTime& t) {
  std::tm tm{};
  tm.tm_year = t.year - 1900;
  tm.tm_mon = t.month - 1;
  tm.tm_mday = t.day;
  tm.tm_hour = t.hour;
  tm.tm_min = t.minute;
  tm.tm_sec = t.second;
  const long days = days_from_civil(t.year, t.month, t.day);
  tm.tm_wday = int(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday (4)
  tm.tm_yday = int(days - days_from_civil(t.year, 1, 1));
  tm.tm_isdst = -1;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out += fmt[i];
      continue;
    }
    // One directive with glibc's optional flags and width (%-d, %_H, %10A).
    size_t j = i + 1;
    while (j < fmt.size() && (fmt[j] == '-' || fmt[j] == '_' || fmt[j] == '0' || fmt[j] == '^' || fmt[j] == '#')) ++j;
    while (j < fmt.size() && fmt[j] >= '1' && fmt[j] <= '9' && j - i < 6) ++j;
    while (j < fmt.size() && fmt[j] >= '0' && fmt[j] <= '9' && j - i < 6) ++j;
    if (j >= fmt.size()) {
      out.append(fmt.substr(i));
      break;
    }
    const char c = fmt[j];
    if (c == 'f') {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%06d", t.microsecond);
      out += buf;
    } else if (c == 'z' || c == 'Z') {
      // a naive time has no zone
    } else if (c == '%') {
      out += '%';
    } else {
      const std::string directive(fmt.substr(i, j - i + 1));
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, directive.c_str(), &tm);
      out.append(buf, n);
    }
    i = j;
  }
  return out;
}

}  // namespace fish::chat::jinja
