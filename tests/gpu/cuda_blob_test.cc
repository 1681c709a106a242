// Runs everywhere (no GPU needed): the cuda metadata codec rejects malformed
// input, and agents with the cuda transport start on a machine without a GPU.
#include <gtest/gtest.h>

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

TEST(CudaTransport, AgentsStartWithDefaultTransportsWithoutAGpu) {
  AgentOptions o;
  o.name = "a";
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  o.name = "b";
  o.transports = {"cuda"};
  auto b = Agent::Create(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE((*a)->ExportMetadata().ok());
}

}  // namespace
}  // namespace kvlane::core
