// Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/): a few
// valid metadata blobs, valid Hello + frame streams (frame_fuzz's layout:
// fuzz_util.h) and valid cuda blobs of each export kind.
//   make_seeds OUT_DIR   (creates OUT_DIR/meta, OUT_DIR/frame and OUT_DIR/cuda_blob)
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "fuzz_util.h"
#include "transport/cuda/cuda_blob.h"
#include "transport/stream/hello_mac.h"

namespace {

using namespace kvlane;
using namespace kvlane::core;
namespace fs = std::filesystem;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// The mode byte, then a Hello that carries its real proof (mode 0) or a zero
// proof for the target to sign (kSignHello).
std::string Hello(uint8_t mode = 0) {
  const std::string name = "initiator";
  StreamHello h{};
  h.magic = kHelloMagic;
  h.version = kWireVersion;
  h.role = static_cast<uint8_t>(ConnRole::kLane);
  h.name_len = static_cast<uint8_t>(name.size());
  h.target_id = fuzz::kAgentId;
  h.nonce.fill(0x6e);
  if (!(mode & fuzz::kSignHello))
    h.proof =
        HelloProof(fuzz::FixedSecret(), fuzz::ServerNonce(), h.nonce, h.target_id, h.version, name);
  std::string out(1, static_cast<char>(mode));
  fuzz::Append(&out, h);
  return out + name;
}

std::string Frame(FrameType type, const std::vector<WireSeg>& segs, bool payload) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(type);
  h.nseg = static_cast<uint32_t>(segs.size());
  for (const WireSeg& s : segs) h.bytes += s.len;
  std::string out;
  fuzz::Append(&out, h);
  for (const WireSeg& s : segs) fuzz::Append(&out, s);
  if (payload) out.append(h.bytes, '\x42');
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  AgentMeta m;
  m.name = "prefill-0";
  m.agent_id = fuzz::kAgentId;
  m.secret = fuzz::FixedSecret();
  m.pid = 4242;
  Write(out / "meta", "no-pieces", EncodeMeta(m));
  m.hostname = "node-a";
  m.boot_id = "0b7e1d3c-5f0a-4b8e-9d2c-1a2b3c4d5e6f";
  m.tcp_host = "10.0.0.1";
  m.tcp_port = 7000;
  m.shm_socket = "kvlane-1122334455667788";
  m.pieces = {{0x1111, 0x10000, 0x1000, 1, MemoryKind::kHost, 0},
              {0x2222, 0x20000, 0x40000, 2, MemoryKind::kHost, 0, Access::kReadOnly}};
  Write(out / "meta", "two-pieces", EncodeMeta(m));
  m.cuda_blob = std::string(64, '\x07');
  m.pieces.push_back({0x3333, 0x7f0000000000, 1ull << 32, 3, MemoryKind::kCuda, 1});
  Write(out / "meta", "cuda", EncodeMeta(m));

  const uint64_t b = fuzz::kRegionBase, k = fuzz::kLiveKey;
  Write(out / "frame", "hello-only", Hello());
  Write(out / "frame", "hello-signed-by-target", Hello(fuzz::kSignHello));
  Write(out / "frame", "read", Hello() + Frame(FrameType::kRead, {{k, b, 4096, 0}}, false));
  Write(out / "frame", "write",
        Hello(fuzz::kSignHello) + Frame(FrameType::kWrite, {{k, b + 100, 64, 0}}, true));
  Write(out / "frame", "write-read-only",
        Hello(fuzz::kSignHello) +
            Frame(FrameType::kWrite, {{k, fuzz::kReadOnlyBase + 64, 64, 0}}, true));
  Write(out / "frame", "multi-seg",
        Hello() + Frame(FrameType::kRead, {{k, b, 16, 0}, {k, b + (1 << 18) - 8, 16, 0}, {7, b, 8, 0}}, false));
  std::string notify = Hello();
  FrameHeader n{};
  n.type = static_cast<uint8_t>(FrameType::kNotify);
  n.bytes = 5;
  fuzz::Append(&notify, n);
  notify += "hello";
  FrameHeader nop{};
  nop.type = static_cast<uint8_t>(FrameType::kNop);
  fuzz::Append(&notify, nop);
  Write(out / "frame", "notify-nop", notify + Frame(FrameType::kWrite, {{k, b + fuzz::kRegionLen - 8, 8, 0}}, true));

  CudaBlob cb;
  cb.socket = "kvlane-cuda-1122334455667788";
  cb.devices = 2;
  Write(out / "cuda_blob", "no-exports", EncodeCudaBlob(cb));
  CudaExport legacy;
  legacy.key = 0x3333;
  legacy.piece_base = 0x7f0000010000;
  legacy.piece_len = 0x10000;
  legacy.alloc_base = 0x7f0000000000;
  legacy.alloc_len = 0x200000;
  for (size_t i = 0; i < legacy.handle.size(); ++i) legacy.handle[i] = static_cast<uint8_t>(i);
  CudaExport vmm = legacy;
  vmm.key = 0x4444;
  vmm.kind = ExportKind::kVmm;
  vmm.device = 1;
  vmm.allocs = {{0x7f0000000000, 0x100000, kVmmPosixFd, {}},
                {0x7f0000100000, 0x100000, kVmmPosixFd | kVmmFabric, {}}};
  vmm.allocs[1].fabric.fill(0x5a);
  CudaExport none = legacy;
  none.key = 0x5555;
  none.kind = ExportKind::kNone;
  none.reason = "not exportable";
  cb.exports = {legacy};
  Write(out / "cuda_blob", "legacy", EncodeCudaBlob(cb));
  cb.exports = {legacy, vmm, none};
  Write(out / "cuda_blob", "all-kinds", EncodeCudaBlob(cb));
  return 0;
}
