// Stop strings and UTF-8 hold-back of a reply's text: see text_stream.h.
#include "text_stream.h"

#include <algorithm>

namespace fish::serve {

size_t incomplete_utf8_tail(const std::string& s) {
  // The last lead byte among the final three: does its character need more bytes?
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 && c <= 0xF7 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back && c < 0xF8 ? back : 0;
  }
  return 0;  // no lead byte close enough: invalid bytes go out as they are
}

TextStream::TextStream(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string TextStream::push(const std::string& piece) {
  if (stopped_) return "";
  held_ += piece;
  // The earliest stop string in what is held (none can straddle what went
  // out: a possible beginning of one is always held back).
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold back the longest end of the text that begins some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  keep = std::max(keep, incomplete_utf8_tail(held_));
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string TextStream::flush() {
  std::string out;
  out.swap(held_);
  return stopped_ ? "" : out;
}

}  // namespace fish::serve
