// libFuzzer target: what a stream server parses from an untrusted initiator,
// in the server's order, without sockets: the Hello (CheckHello, against a fixed
// challenge nonce; a forged proof, or a proven one whose name is not plain
// text, must be refused), then frames
// (CheckFrameHeader, the segment table, CheckSegments) and the live registry
// lookup of every segment. Invariants: a segment the registry accepts lies
// inside the registered ranges, and a WRITE's never inside the read-only one.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/plain_text.h"
#include "core/registry.h"
#include "fuzz_util.h"
#include "transport/stream/frame_check.h"
#include "transport/stream/hello_mac.h"

namespace {

using namespace kvlane;
using namespace kvlane::core;

struct Target {
  Target() : registry(1 << 18) {  // 256 KiB pieces: a range spans several
    (void)registry.Add(fuzz::kRegionBase, fuzz::kRegionLen, MemoryKind::kHost, 0);
    (void)registry.Add(fuzz::kReadOnlyBase, fuzz::kRegionLen, MemoryKind::kHost, 0,
                       Access::kReadOnly);
    pieces = registry.Pieces();
  }
  Registry registry;
  std::vector<Piece> pieces;
};

class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool Take(void* out, size_t len) {
    if (n_ - pos_ < len) return false;
    std::memcpy(out, d_ + pos_, len);
    pos_ += len;
    return true;
  }
  bool Skip(uint64_t len) {
    if (n_ - pos_ < len) return false;
    pos_ += len;
    return true;
  }

 private:
  const uint8_t* d_;
  size_t n_, pos_ = 0;
};

void ServeSegments(Target& t, Op op, std::vector<WireSeg>& segs) {
  auto lock = t.registry.LockShared();
  // What `op` may reach: both regions for a READ, the read-write one for a WRITE.
  const uint64_t span = op == Op::kWrite ? fuzz::kRegionLen : 2 * fuzz::kRegionLen;
  for (WireSeg& s : segs) {
    if (s.key == fuzz::kLiveKey) s.key = t.pieces[s.addr % t.pieces.size()].key;
    uint8_t* p = nullptr;
    if (!t.registry.LookupLocked(s.key, s.addr, s.len, op, &p).ok()) return;  // error reply
    uint64_t a = reinterpret_cast<uint64_t>(p);
    if (a < fuzz::kRegionBase || s.len > span || a - fuzz::kRegionBase > span - s.len)
      __builtin_trap();  // accepted a range outside what `op` may reach
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Target target;
  Input in(data, size);
  uint8_t mode = 0;
  StreamHello hello{};
  if (!in.Take(&mode, 1) || !in.Take(&hello, sizeof(hello))) return 0;
  std::string name;  // read only after a good magic and version, as the server does
  if (hello.magic == kHelloMagic && hello.version == kWireVersion) {
    name.resize(hello.name_len);
    if (!in.Take(name.data(), name.size())) return 0;
  }
  const Mac proof = HelloProof(fuzz::FixedSecret(), fuzz::ServerNonce(), hello.nonce,
                               hello.target_id, hello.version, name);
  if (mode & fuzz::kSignHello) hello.proof = proof;
  bool authed =
      CheckHello(hello, name, fuzz::kAgentId, fuzz::FixedSecret(), fuzz::ServerNonce()).ok();
  if (authed != (std::memcmp(hello.proof.data(), proof.data(), proof.size()) == 0 &&
                 hello.target_id == fuzz::kAgentId && hello.magic == kHelloMagic &&
                 hello.version == kWireVersion && hello.name_len > 0 && IsPlainText(name)))
    __builtin_trap();
  if (!authed) return 0;
  std::vector<WireSeg> segs;
  for (;;) {
    FrameHeader h{};
    if (!in.Take(&h, sizeof(h))) return 0;
    if (!CheckFrameHeader(h).ok()) return 0;  // connection closed
    auto type = static_cast<FrameType>(h.type);
    if (type == FrameType::kNop) continue;
    if (type == FrameType::kNotify) {
      if (!in.Skip(h.bytes)) return 0;
      continue;
    }
    if (h.nseg == 0 || h.nseg > kMaxWireSegs) __builtin_trap();  // header check let it through
    segs.resize(h.nseg);
    if (!in.Take(segs.data(), h.nseg * sizeof(WireSeg))) return 0;
    if (!CheckSegments(h, segs).ok()) return 0;
    uint64_t sum = 0;
    for (const WireSeg& s : segs) sum += s.len;
    if (sum != h.bytes || sum > kMaxFrameBytes) __builtin_trap();
    ServeSegments(target, type == FrameType::kWrite ? Op::kWrite : Op::kRead, segs);
    if (type == FrameType::kWrite && !in.Skip(h.bytes)) return 0;  // inline payload (tcp)
  }
}
