// Runs everywhere (no GPU needed): handing VMM allocations' file descriptors to
// authenticated peers over the cuda control socket (SCM_RIGHTS), with a fake
// fd source standing in for the driver.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "transport/cuda/cuda_control.h"
#include "transport/cuda/fd_passing.h"

namespace kvlane::core {
namespace {

constexpr uint64_t kKey = 0x1234;

// A memfd holding `text`: what an exporter's fd would name.
Fd MemFdWith(const std::string& text) {
  Fd fd(memfd_create("kvlane-fd-test", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return fd;
}

std::string ReadAll(int fd) {
  char buf[64] = {};
  ssize_t n = pread(fd, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, n) : std::string();
}

TEST(FdPassing, DescriptorRidesOnTheBytes) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Fd a(sv[0]), b(sv[1]);
  Fd file = MemFdWith("payload");
  const char msg[] = "0123456789abcdef";
  ASSERT_TRUE(SendWithFd(a.get(), msg, sizeof(msg), file.get()).ok());
  char got[sizeof(msg)] = {};
  Fd received;
  ASSERT_TRUE(RecvWithFd(b.get(), got, sizeof(got), &received).ok());
  EXPECT_EQ(std::memcmp(got, msg, sizeof(msg)), 0);
  ASSERT_TRUE(received.valid());
  EXPECT_NE(received.get(), file.get());
  EXPECT_EQ(ReadAll(received.get()), "payload");
  ASSERT_TRUE(SendWithFd(a.get(), msg, 4, -1).ok());  // no descriptor at all
  Fd none;
  ASSERT_TRUE(RecvWithFd(b.get(), got, 4, &none).ok());
  EXPECT_FALSE(none.valid());
}

class FdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.name = "target";
    ctx_.agent_id = 77;
    ctx_.secret.fill(5);
    ctx_.options.connect_timeout = std::chrono::milliseconds(2000);
    ctx_.options.io_timeout = std::chrono::milliseconds(2000);
    ctx_.registry = std::make_shared<Registry>(1ull << 32);
    ctx_.notifs = std::make_shared<NotifQueue>(1 << 20);
    server_ =
        std::make_unique<ControlServer>(&ctx_, [](uint64_t key, uint32_t index) -> Result<Fd> {
          if (key != kKey) return Status::RemoteStale("not registered");
          if (index != 0) return Status::InvalidArgument("no such allocation");
          return MemFdWith("allocation-0");
        });
    socket_ = "kvlane-fd-test-" + std::to_string(getpid());
    ASSERT_TRUE(server_->Start(socket_).ok());
    peer_.self_name = "init";
    peer_.peer.name = "target";
    peer_.peer.agent_id = ctx_.agent_id;
    peer_.peer.secret = ctx_.secret;
    peer_.socket = socket_;
    peer_.connect_timeout = peer_.io_timeout = std::chrono::milliseconds(2000);
  }
  void TearDown() override { server_->Stop(); }

  // Asks for allocation 0 of kKey on an authenticated connection and checks the
  // fd that comes back names it.
  static void ExpectAllocationFd(int sock) {
    FdRequest good{kKey, 0, 0};
    ASSERT_TRUE(SendCtl(sock, CtlType::kFdRequest, 0, &good, sizeof(good)).ok());
    ASSERT_TRUE(WaitReadable(sock, std::chrono::milliseconds(2000)).ok());
    CtlFrame f{};
    Fd fd;
    ASSERT_TRUE(RecvWithFd(sock, &f, sizeof(f), &fd).ok());
    EXPECT_EQ(f.seq, 0u);
    ASSERT_TRUE(fd.valid());
    EXPECT_EQ(ReadAll(fd.get()), "allocation-0");
  }

  AgentContext ctx_;
  std::unique_ptr<ControlServer> server_;
  std::string socket_;
  FdPeer peer_;
};

TEST_F(FdServerTest, HandsAnFdForARegisteredKey) {
  for (int i = 0; i < 3; ++i) {
    auto fd = FetchPeerFd(peer_, kKey, 0);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    EXPECT_EQ(ReadAll(fd->get()), "allocation-0");
  }
}

TEST_F(FdServerTest, UnknownKeyOrIndexComesBackAsTheExportersStatus) {
  auto stale = FetchPeerFd(peer_, kKey + 1, 0);
  EXPECT_EQ(stale.status().code(), Code::kRemoteStale) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("not registered"), std::string::npos);
  auto index = FetchPeerFd(peer_, kKey, 1);
  EXPECT_EQ(index.status().code(), Code::kInvalidArgument) << index.status().ToString();
}

TEST_F(FdServerTest, WrongSecretGetsNothing) {
  peer_.peer.secret[0] ^= 1;
  auto fd = FetchPeerFd(peer_, kKey, 0);
  EXPECT_EQ(fd.status().code(), Code::kNotAllowed) << fd.status().ToString();
}

// Malformed requests get an error reply and the connection keeps serving.
TEST_F(FdServerTest, MalformedRequestsGetAnErrorReply) {
  auto sock = DialControl(peer_.self_name, peer_.connect_timeout, peer_.peer, socket_);
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  FdRequest bad_reserved{kKey, 0, 1};
  const std::string shapes[] = {
      std::string(3, 'x'), std::string(17, 'x'), std::string(),
      std::string(reinterpret_cast<const char*>(&bad_reserved), sizeof(bad_reserved))};
  for (const std::string& req : shapes) {
    ASSERT_TRUE(
        SendCtl(sock->get(), CtlType::kFdRequest, 0, req.data(), static_cast<uint32_t>(req.size()))
            .ok());
    CtlFrame f{};
    std::string text;
    Fd fd;
    ASSERT_TRUE(WaitReadable(sock->get(), std::chrono::milliseconds(2000)).ok());
    ASSERT_TRUE(RecvWithFd(sock->get(), &f, sizeof(f), &fd).ok());
    text.resize(f.len);
    ASSERT_TRUE(RecvAll(sock->get(), text.data(), f.len).ok());
    EXPECT_EQ(f.type, static_cast<uint32_t>(CtlType::kFdReply));
    EXPECT_EQ(static_cast<int32_t>(f.seq), static_cast<int32_t>(Code::kInvalidArgument)) << text;
    EXPECT_FALSE(fd.valid());
  }
  ASSERT_NO_FATAL_FAILURE(ExpectAllocationFd(sock->get()));
}

// A connection that never says Hello is cut after connect_timeout; an
// authenticated one idles longer than that and is still served.
TEST_F(FdServerTest, SilentConnectionIsCutButIdleAuthenticatedOneIsNot) {
  ctx_.options.connect_timeout = std::chrono::milliseconds(200);
  auto silent = ConnectUnix(socket_, std::chrono::milliseconds(2000));
  ASSERT_TRUE(silent.ok()) << silent.status().ToString();
  auto sock = DialControl(peer_.self_name, peer_.connect_timeout, peer_.peer, socket_);
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitReadable(silent->get(), std::chrono::milliseconds(3000)).ok()) << "never cut";
  char b = 0;
  EXPECT_EQ(recv(silent->get(), &b, 1, 0), 0);  // end of stream: the server hung up
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2000));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // idle past connect_timeout
  ASSERT_NO_FATAL_FAILURE(ExpectAllocationFd(sock->get()));
}

// A revocation sent while a fetch waits is confirmed by the fetching connection.
TEST_F(FdServerTest, RevocationDuringAFetchIsAcknowledged) {
  std::thread revoker;
  auto slow = std::make_unique<ControlServer>(&ctx_, [&](uint64_t, uint32_t) -> Result<Fd> {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return MemFdWith("late");
  });
  std::string name = socket_ + "-slow";
  ASSERT_TRUE(slow->Start(name).ok());
  peer_.socket = name;
  revoker = std::thread([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    uint64_t keys[] = {kKey};
    auto t0 = std::chrono::steady_clock::now();
    slow->Revoke(keys);  // waits for every connection's acknowledgement
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1500));
  });
  auto fd = FetchPeerFd(peer_, kKey, 0);
  revoker.join();
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(ReadAll(fd->get()), "late");
  slow->Stop();
}

}  // namespace
}  // namespace kvlane::core
