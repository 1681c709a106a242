// The local transport (transport/local/local_transport.h): an agent of this
// process is reached through it only with its genuine metadata. The blob's
// secret is what every other transport makes an initiator prove; a blob with
// the id and pieces of an agent but another secret reaches none of its memory.
#include "transport/local/local_transport.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/metadata.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

constexpr uint64_t kBytes = 64 << 10;

// A WRITE of `src` over `dst` at `peer`, posted and waited for: the first error.
Status Write(Agent& a, const std::string& peer, const std::vector<uint8_t>& src,
             std::vector<uint8_t>& dst) {
  auto h = MakeSimple(a, peer, Op::kWrite, src.data(), dst.data(), src.size());
  if (!h.ok()) return h.status();
  return PostAndWait(a, &h.value());
}

// `b`'s blob with its own id, process token and pieces, another name and its
// secret changed: what a holder of the id (not the secret) could make.
std::string ForgedBlob(Agent& b) {
  auto meta = core::DecodeMeta(b.ExportMetadata().value());
  EXPECT_TRUE(meta.ok()) << meta.status().ToString();
  meta->name = "forged";
  meta->secret[0] ^= 0x5a;
  return core::EncodeMeta(meta.value());
}

class LocalTransportTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(LocalTransportTest, ABlobWithAnotherSecretReachesNoMemory) {
  Buffers bufs;
  AgentOptions o;
  o.transports = GetParam();
  o.name = "a";
  auto a = Agent::Create(o);
  o.name = "b";
  auto b = Agent::Create(o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  auto& src = bufs.Make(kBytes);
  auto& dst = bufs.Make(kBytes, 0);
  Fill(src, 9);
  ASSERT_TRUE(a.value()->RegisterMemory(src.data(), src.size()).ok());
  ASSERT_TRUE(b.value()->RegisterMemory(dst.data(), dst.size()).ok());

  auto forged = a.value()->LoadPeer(ForgedBlob(*b.value()));
  ASSERT_TRUE(forged.ok()) << forged.status().ToString();
  const Status write = Write(*a.value(), "forged", src, dst);
  EXPECT_EQ(write.code(), Code::kNotAllowed) << write.ToString();
  EXPECT_NE(write.message().find("local"), std::string::npos) << write.ToString();
  EXPECT_EQ(FirstNot(dst.data(), dst.size(), 0), -1) << "a WRITE reached b's memory";
  const Status notify = a.value()->SendNotification("forged", "x");
  EXPECT_EQ(notify.code(), Code::kNotAllowed) << notify.ToString();
  EXPECT_TRUE(b.value()->TakeNotifications().empty());
  EXPECT_EQ(a.value()->PeerTransport("forged").status().code(), Code::kNotAllowed);

  // The genuine blob, loaded beside it, goes through local.
  Connect(*a.value(), *b.value());
  const Status genuine = Write(*a.value(), "b", src, dst);
  ASSERT_TRUE(genuine.ok()) << genuine.ToString();
  EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 9), -1);
  auto via = a.value()->PeerTransport("b");
  ASSERT_TRUE(via.ok()) << via.status().ToString();
  EXPECT_EQ(via.value(), "local");
}

INSTANTIATE_TEST_SUITE_P(Transports, LocalTransportTest,
                         ::testing::Values(std::vector<std::string>{"local"},
                                           std::vector<std::string>{"local", "tcp"}),
                         [](const auto& info) {
                           return info.param.size() == 1 ? "LocalOnly" : "LocalThenTcp";
                         });

}  // namespace
}  // namespace kvlane::test
