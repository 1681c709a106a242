// Runs everywhere (no GPU needed): the cuda metadata codec rejects malformed
// input, and agents with the cuda transport start on a machine without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "kvlane/kvlane.h"
#include "transport/cuda/cuda_blob.h"

namespace kvlane::core {
namespace {

CudaBlob Sample() {
  CudaBlob b{"kvlane-cuda-1", 2, {}};
  CudaExport e;
  e.key = 7;
  e.device = 1;
  e.alloc_base = 0x1000;
  e.alloc_len = 0x10000;
  e.piece_base = 0x2000;
  e.piece_len = 0x1000;
  b.exports.push_back(e);
  return b;
}

TEST(CudaBlob, RoundTrips) {
  auto d = DecodeCudaBlob(EncodeCudaBlob(Sample()));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->socket, "kvlane-cuda-1");
  ASSERT_EQ(d->exports.size(), 1u);
  EXPECT_EQ(d->exports[0].piece_base, 0x2000u);
}

TEST(CudaBlob, RejectsTruncationTrailingBytesAndPiecesOutsideTheAllocation) {
  std::string good = EncodeCudaBlob(Sample());
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(DecodeCudaBlob(good.substr(0, n)).ok()) << "truncated at " << n;
  EXPECT_FALSE(DecodeCudaBlob(good + "x").ok());
  CudaBlob bad = Sample();
  bad.exports[0].piece_base = 0x10800;  // ends past the allocation
  EXPECT_FALSE(DecodeCudaBlob(EncodeCudaBlob(bad)).ok());
  bad = Sample();
  bad.exports[0].alloc_base = ~0ull - 10;  // wraps
  EXPECT_FALSE(DecodeCudaBlob(EncodeCudaBlob(bad)).ok());
}

// A piece over three VMM allocations mapped back to back (fd, fabric, both).
CudaBlob VmmSample() {
  CudaBlob b{"kvlane-cuda-2", 1, {}};
  CudaExport e;
  e.key = 9;
  e.kind = ExportKind::kVmm;
  e.alloc_base = 0x200000;
  e.alloc_len = 0x600000;
  e.piece_base = 0x300000;
  e.piece_len = 0x400000;
  const uint8_t handles[] = {kVmmPosixFd, kVmmFabric, kVmmPosixFd | kVmmFabric};
  for (int i = 0; i < 3; ++i) {
    CudaVmmAlloc a;
    a.base = 0x200000 + i * 0x200000;
    a.len = 0x200000;
    a.handles = handles[i];
    a.fabric.fill(static_cast<uint8_t>(0xA0 + i));
    e.allocs.push_back(a);
  }
  b.exports.push_back(e);
  CudaExport none = Sample().exports[0];
  none.key = 10;
  none.kind = ExportKind::kNone;
  none.reason = "VMM allocation not exportable";
  b.exports.push_back(none);
  return b;
}

TEST(CudaBlob, VmmAndUnexportableEntriesRoundTrip) {
  auto d = DecodeCudaBlob(EncodeCudaBlob(VmmSample()));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->exports.size(), 2u);
  const CudaExport& v = d->exports[0];
  EXPECT_EQ(v.kind, ExportKind::kVmm);
  ASSERT_EQ(v.allocs.size(), 3u);
  EXPECT_EQ(v.allocs[2].base, 0x600000u);
  EXPECT_EQ(v.allocs[0].handles, kVmmPosixFd);
  EXPECT_EQ(v.allocs[1].fabric[63], 0xA1);
  EXPECT_EQ(v.allocs[2].handles, kVmmPosixFd | kVmmFabric);
  EXPECT_EQ(v.allocs[0].fabric[0], 0);  // not sent without the fabric bit
  EXPECT_EQ(d->exports[1].kind, ExportKind::kNone);
  EXPECT_EQ(d->exports[1].reason, "VMM allocation not exportable");
}

TEST(CudaBlob, RejectsTruncatedOrInconsistentVmmEntries) {
  std::string good = EncodeCudaBlob(VmmSample());
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(DecodeCudaBlob(good.substr(0, n)).ok()) << "truncated at " << n;
  EXPECT_FALSE(DecodeCudaBlob(good + std::string(1, '\0')).ok());
  auto rejects = [](const std::function<void(CudaExport&)>& spoil) {
    CudaBlob b = VmmSample();
    spoil(b.exports[0]);
    return !DecodeCudaBlob(EncodeCudaBlob(b)).ok();
  };
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs[1].base += 0x1000; }));       // gap
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs[0].base -= 0x1000; }));       // before alloc_base
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs.pop_back(); }));              // short of alloc_len
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs[2].len += 0x200000; }));      // past alloc_len
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs[1].len = 0; }));
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs.clear(); }));
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs[0].handles = 0; }));
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs[0].handles = 4; }));          // unknown type
  EXPECT_TRUE(rejects([](CudaExport& e) { e.piece_base = 0x500000; }));          // piece past the range
  EXPECT_TRUE(rejects([](CudaExport& e) { e.kind = static_cast<ExportKind>(7); }));
  EXPECT_TRUE(rejects([](CudaExport& e) { e.allocs[1].base = ~0ull - 0x1000; }));  // wraps
}

TEST(CudaBlob, BoundsCountsAndReasonsFromUntrustedBytes) {
  std::string good = EncodeCudaBlob(VmmSample());
  // The allocation count sits after the entry header (8+4+4*8) and the kind byte.
  size_t count_at = 4 + 2 + 4 + std::string("kvlane-cuda-2").size() + 4 + 4 + 44 + 1;
  uint32_t three = 0;
  std::memcpy(&three, good.data() + count_at, 4);
  ASSERT_EQ(three, 3u);
  for (uint32_t n : {0u, 4u, 1u << 16, (1u << 16) + 1, 0xffffffffu}) {
    std::string bad = good;
    std::memcpy(bad.data() + count_at, &n, 4);
    EXPECT_FALSE(DecodeCudaBlob(bad).ok()) << "count " << n;
  }
  CudaBlob b = VmmSample();
  b.exports[1].reason = std::string(5000, 'r');  // the encoder cuts it; the decoder bounds it
  auto d = DecodeCudaBlob(EncodeCudaBlob(b));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->exports[1].reason.size(), kMaxReasonBytes);
  std::string noisy = EncodeCudaBlob(VmmSample());
  for (size_t i = 0; i < noisy.size(); ++i) {  // any single corrupted byte: a clean answer, never a crash
    std::string c = noisy;
    c[i] = static_cast<char>(c[i] ^ 0x5a);
    (void)DecodeCudaBlob(c);
  }
}

// What decoding allocates is bounded by the blob, not only by each entry: 17
// pieces of 2^16 one-byte VMM allocations each (each entry within its own cap)
// pass the blob-wide cap and are refused; 16 of them decode.
TEST(CudaBlob, BoundsTheVmmAllocationsOfTheWholeBlob) {
  auto blob = [](uint32_t pieces) {
    CudaBlob b{"kvlane-cuda-3", 1, {}};
    for (uint32_t p = 0; p < pieces; ++p) {
      CudaExport e;
      e.key = p + 1;
      e.kind = ExportKind::kVmm;
      e.alloc_base = e.piece_base = uint64_t{p} << 32;
      e.alloc_len = e.piece_len = kMaxVmmAllocs;
      e.allocs.resize(kMaxVmmAllocs);
      for (uint32_t i = 0; i < kMaxVmmAllocs; ++i)
        e.allocs[i] = {e.alloc_base + i, 1, kVmmPosixFd, {}};
      b.exports.push_back(std::move(e));
    }
    return EncodeCudaBlob(b);
  };
  static_assert(kMaxBlobVmmAllocs == 16 * kMaxVmmAllocs);
  EXPECT_TRUE(DecodeCudaBlob(blob(16)).ok());
  auto d = DecodeCudaBlob(blob(17));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("too many VMM allocations"), std::string::npos)
      << d.status().ToString();
}

TEST(CudaTransport, AgentsStartWithDefaultTransportsWithoutAGpu) {
  AgentOptions o;
  o.name = "a";
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  o.name = "b";
  o.transports = {"cuda", "tcp"};  // cuda alone, with no device, is refused
                                   // (AgentOptionsTest.ACudaOnlyAgentWithNoDeviceIsRefused)
  auto b = Agent::Create(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE((*a)->ExportMetadata().ok());
}

}  // namespace
}  // namespace kvlane::core
