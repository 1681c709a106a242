#include "request.h"

#include <vector>

#include "oracle.h"

namespace lanebench {
namespace {

std::vector<std::string_view> Fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (out.size() <= 5) {
    const size_t space = s.find(' ', at);
    out.push_back(s.substr(at, space == std::string_view::npos ? space : space - at));
    if (space == std::string_view::npos) break;
    at = space + 1;
  }
  return out;
}

}  // namespace

kvlane::Result<TargetRequest> ParseRequest(std::string_view message, uint64_t buffer_bytes) {
  const std::vector<std::string_view> f = Fields(message);
  if (f.size() != 5) return kvlane::Status::InvalidArgument("bad control message: not five fields");
  TargetRequest r;
  r.cmd = std::string(f[0]);
  if (r.cmd != "fill" && r.cmd != "verify" && r.cmd != "flip")
    return kvlane::Status::InvalidArgument("bad control message: unknown command");
  if (!ParseDigits(f[1], &r.epoch) || !ParseDigits(f[2], &r.src) || !ParseDigits(f[3], &r.off) ||
      !ParseDigits(f[4], &r.len))
    return kvlane::Status::InvalidArgument("bad control message: a field is not a number");
  if (r.len < kMarkerBytes || r.len > buffer_bytes || r.off > buffer_bytes - r.len)
    return kvlane::Status::InvalidArgument("bad control message: the range is outside the buffer");
  return r;
}

}  // namespace lanebench
