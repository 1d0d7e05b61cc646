// strftime_now(fmt): the date a template prints ("Today Date: 01 Dec 2026").
// Hugging Face's global returns datetime.now().strftime(fmt), the local wall
// clock; a renderer needs to fix "now" for reproducible output (tests, the
// `now` field of `fish template`'s input), so the time is a plain value here.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace fish::chat::jinja {

// A naive (zone-less) date and time, as Python's datetime.now() returns.
struct DateTime {
  int year = 1970, month = 1, day = 1;
  int hour = 0, minute = 0, second = 0, microsecond = 0;
};

// "2026-12-01", "2026-12-01T12:00", "2026-12-01 12:00:00.5", with an optional
// "Z" or "+01:00" that is accepted and ignored (the wall-clock time as written
// is used, as a naive datetime would print it). nullopt when malformed.
std::optional<DateTime> parse_iso_datetime(std::string_view text);

// The local time now.
DateTime local_now();

// Python's datetime.strftime in the C locale: %f is the microseconds, %z and
// %Z are empty for a naive time, everything else is the C library's strftime.
std::string py_strftime(std::string_view fmt, const DateTime& t);

}  // namespace fish::chat::jinja
