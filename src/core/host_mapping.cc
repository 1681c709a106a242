#include "core/host_mapping.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>

#include "core/hex.h"

namespace kvlane::core {
namespace {

struct Mapping {
  uint64_t start = 0, end = 0;
  bool readable = false, writable = false;
};

// Parses "start-end perms ..." (hex addresses); false for a line of another shape.
bool ParseLine(std::string_view line, Mapping* m) {
  const char* p = line.data();
  const char* end = p + line.size();
  auto r = std::from_chars(p, end, m->start, 16);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != '-') return false;
  r = std::from_chars(r.ptr + 1, end, m->end, 16);
  if (r.ec != std::errc() || end - r.ptr < 3 || *r.ptr != ' ') return false;
  m->readable = r.ptr[1] == 'r';
  m->writable = r.ptr[2] == 'w';
  return m->start < m->end;
}

}  // namespace

Status CheckHostMappedIn(std::string_view maps, uint64_t addr, uint64_t len, bool writable) {
  const uint64_t last = addr + len;
  uint64_t covered = addr;  // [addr, covered) is mapped as wanted
  const char* want = writable ? "readable and writable" : "readable";
  while (!maps.empty() && covered < last) {
    const size_t nl = maps.find('\n');
    const std::string_view line = maps.substr(0, nl);
    maps = nl == std::string_view::npos ? std::string_view() : maps.substr(nl + 1);
    Mapping m;
    if (!ParseLine(line, &m) || m.end <= covered) continue;
    if (m.start > covered) break;  // a gap: not mapped
    if (!m.readable || (writable && !m.writable)) {
      return Status::InvalidArgument(
          "host memory at " + Hex(covered) + " is not " + want +
          " in this process (a device pointer? register it as MemoryKind::kCuda)" +
          (m.readable && writable ? "; read-only memory cannot be registered" : ""));
    }
    covered = m.end;
  }
  if (covered >= last) return Status::Ok();
  return Status::InvalidArgument("host memory at " + Hex(covered) +
                                 " is not mapped in this process (a device pointer? register "
                                 "it as MemoryKind::kCuda)");
}

Status CheckHostMapped(uint64_t addr, uint64_t len, bool writable) {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Ok();
  std::string text;
  char buf[16384];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (n < 0) return Status::Ok();  // unreadable: nothing to check against
  return CheckHostMappedIn(text, addr, len, writable);
}

}  // namespace kvlane::core
