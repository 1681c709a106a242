// The stream handshake end to end (transport/stream/handshake.h): a Hello
// captured on one connection is refused on another, a real initiator's bytes
// never hold the secret, and an initiator refuses a target that cannot prove it
// holds the secret of the metadata it loaded (before sending it any frame).
// A connection that fails before the challenge is reported as it failed.
#include "transport/stream/handshake.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "core/random.h"
#include "loopback_listener.h"
#include "raw_peer.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

core::Secret RandomSecret() {
  core::Secret s;
  core::RandomBytes(s.data(), s.size());
  return s;
}

class HandshakeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    AgentOptions o = OptionsFor("target", GetParam());
    o.connect_timeout = 500ms;
    auto t = Agent::Create(o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(t).value();
    ASSERT_TRUE(target_->RegisterMemory(region_.data(), region_.size()).ok());
    info_ = Inspect(target_->ExportMetadata().value());
  }
  std::vector<uint8_t> region_ = std::vector<uint8_t>(4096, 0x11);
  std::unique_ptr<Agent> target_;
  TargetInfo info_;
};

TEST_P(HandshakeTest, HelloReplayedOnANewConnectionIsRefused) {
  auto first = RawPeer::Connect(GetParam(), info_.meta);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->Hello(info_.meta.agent_id, info_.meta.secret).value_or(-100), 0);
  const std::string captured = first->last_hello();
  EXPECT_EQ(captured.find(std::string(info_.meta.secret.begin(), info_.meta.secret.end())),
            std::string::npos);
  // The first connection stays open and authenticated: the replay races nothing.
  auto second = RawPeer::Connect(GetParam(), info_.meta);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->SendHello(captured).value_or(-100), static_cast<int32_t>(Code::kNotAllowed));
  core::WireSeg seg{info_.key, info_.base, 64, 0};
  (void)second->SendFrame(core::FrameType::kWrite, 0, {seg}, 64, std::string(64, '\x5a'));
  EXPECT_TRUE(second->ClosedWithin(3s)) << "a replayed Hello left the connection open";
  EXPECT_EQ(region_, std::vector<uint8_t>(4096, 0x11));
}

// A Hello trickled a byte at a time, each well within connect_timeout (500 ms
// here), is cut once connect_timeout passed since the challenge: the socket's
// receive timeout alone restarted at every byte.
TEST_P(HandshakeTest, TrickledHelloIsCutAtConnectTimeout) {
  auto p = RawPeer::Connect(GetParam(), info_.meta);
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE(p->ReadChallenge().has_value());
  const auto t0 = std::chrono::steady_clock::now();
  core::StreamHello h{};
  h.magic = core::kHelloMagic;
  h.version = core::kWireVersion;
  h.name_len = 255;
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof(h));
  bytes += std::string(255, 'n');
  bool cut = false;
  for (size_t i = 0; i < 40 && !cut; ++i)  // 40 bytes, 100 ms apart: 4 s at most
    cut = !p->Send(&bytes[i], 1) || p->ClosedWithin(100ms);
  EXPECT_TRUE(cut) << "the target kept reading a trickled Hello past connect_timeout";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
}

TEST_P(HandshakeTest, OldVersionOneHelloIsRefusedAtOnce) {
  auto p = RawPeer::Connect(GetParam(), info_.meta);
  ASSERT_TRUE(p.has_value());
  struct {  // version 1's Hello: the secret in clear, and no challenge read
    uint32_t magic;
    uint16_t version;
    uint8_t role;
    uint8_t name_len;
    uint64_t target_id;
    uint8_t secret[16];
  } old{};
  old.magic = core::kHelloMagic;
  old.version = 1;
  old.name_len = 3;
  old.target_id = info_.meta.agent_id;
  std::memcpy(old.secret, info_.meta.secret.data(), info_.meta.secret.size());
  std::string bytes(reinterpret_cast<const char*>(&old), sizeof(old));
  ASSERT_TRUE(p->Send((bytes + "old").data(), bytes.size() + 3));
  auto c = p->ReadChallenge();
  ASSERT_TRUE(c.has_value());
  core::StreamHelloReply r{};
  ASSERT_TRUE(core::WaitReadable(p->fd(), 2000ms).ok())
      << "an old Hello must be refused before connect_timeout";
  ASSERT_TRUE(core::RecvAll(p->fd(), &r, sizeof(r)).ok());
  EXPECT_EQ(r.status, static_cast<int32_t>(Code::kNotAllowed));
  EXPECT_TRUE(p->ClosedWithin(3s));
}

INSTANTIATE_TEST_SUITE_P(Transports, HandshakeTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

// Forwards tcp connections to 127.0.0.1:upstream and records, per connection,
// what the initiator sent: a passive eavesdropper.
class RecordingProxy {
 public:
  explicit RecordingProxy(uint16_t upstream) : upstream_(upstream) {}
  ~RecordingProxy() {
    listener_.Stop();
    for (auto& l : links_) {
      shutdown(l->down.get(), SHUT_RDWR);
      shutdown(l->up.get(), SHUT_RDWR);
      l->pump.join();
    }
  }
  uint16_t port() const { return listener_.port(); }
  std::vector<std::string> Sent() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (auto& l : links_) out.push_back(l->sent);
    return out;
  }

 private:
  struct Link {
    core::Fd down, up;
    std::string sent;  // GUARDED_BY(mu_)
    std::thread pump;
  };
  void Serve(core::Fd c) {
    auto up = core::ConnectTcp("127.0.0.1", upstream_, 2s);
    if (!up.ok()) return;
    std::lock_guard lock(mu_);
    auto& l = links_.emplace_back(new Link{std::move(c), std::move(up).value(), {}, {}});
    l->pump = std::thread([this, p = l.get()] { Pump(p); });
  }
  void Pump(Link* l) {
    char buf[65536];
    for (;;) {
      pollfd p[2] = {{l->down.get(), POLLIN, 0}, {l->up.get(), POLLIN, 0}};
      if (poll(p, 2, -1) < 0) return;
      for (int i = 0; i < 2; ++i) {
        if (p[i].revents == 0) continue;
        ssize_t n = recv(p[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (i == 0 && n > 0) {  // recorded before forwarding: complete once answered
          std::lock_guard lock(mu_);
          l->sent.append(buf, static_cast<size_t>(n));
        }
        if (n <= 0 || !core::SendAll(p[1 - i].fd, buf, static_cast<size_t>(n)).ok()) {
          shutdown(l->down.get(), SHUT_RDWR);
          shutdown(l->up.get(), SHUT_RDWR);
          return;
        }
      }
    }
  }
  const uint16_t upstream_;
  std::mutex mu_;
  std::list<std::unique_ptr<Link>> links_;  // GUARDED_BY(mu_) until listener_ stopped
  LoopbackListener listener_{[this](core::Fd c) { Serve(std::move(c)); }};
};

TEST(HandshakeTcp, RealInitiatorNeverSendsTheSecretAndItsHelloCannotBeReplayed) {
  Buffers bufs;
  auto& remote = bufs.Make(4096, 0);
  auto& local = bufs.Make(4096, 0);
  Fill(local, 9);
  auto b = Agent::Create(OptionsFor("b", "tcp"));
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b.value()->RegisterMemory(remote.data(), remote.size()).ok());
  TargetInfo info = Inspect(b.value()->ExportMetadata().value());
  RecordingProxy proxy(info.meta.tcp_port);
  core::AgentMeta via_proxy = info.meta;
  via_proxy.tcp_port = proxy.port();
  auto a = Agent::Create(OptionsFor("a", "tcp"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a.value()->RegisterMemory(local.data(), local.size()).ok());
  ASSERT_TRUE(a.value()->LoadPeer(core::EncodeMeta(via_proxy)).ok());
  auto h = MakeSimple(*a.value(), "b", Op::kWrite, local.data(), remote.data(), 4096);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_TRUE(PostAndWait(*a.value(), &h.value()).ok());
  EXPECT_EQ(FirstMismatch(remote.data(), remote.size(), 9), -1);

  const std::string secret(info.meta.secret.begin(), info.meta.secret.end());
  std::vector<std::string> sent = proxy.Sent();
  ASSERT_FALSE(sent.empty());
  for (const std::string& s : sent)
    EXPECT_EQ(s.find(secret), std::string::npos) << "the secret went on the wire";
  ASSERT_GE(sent[0].size(), sizeof(core::StreamHello));
  core::StreamHello hello{};
  std::memcpy(&hello, sent[0].data(), sizeof(hello));
  ASSERT_EQ(hello.target_id, info.meta.agent_id);
  ASSERT_GE(sent[0].size(), sizeof(hello) + hello.name_len);
  const std::string captured = sent[0].substr(0, sizeof(hello) + hello.name_len);

  auto replay = RawPeer::Connect("tcp", info.meta);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->SendHello(captured).value_or(-100), static_cast<int32_t>(Code::kNotAllowed));
  EXPECT_TRUE(replay->ClosedWithin(3s));
}

// A tcp listener at the address of a blob whose secret it does not hold: it
// accepts every Hello, answering with a proof made with another secret.
class ImpostorTarget {
 public:
  std::string Blob() const {
    core::AgentMeta m;
    m.name = "impostor";
    m.agent_id = agent_id_;
    m.secret = RandomSecret();  // the real agent's, which the impostor lacks
    m.tcp_host = "127.0.0.1";
    m.tcp_port = listener_.port();
    m.pieces = {{0x51, 1ull << 40, 1 << 20, 1, MemoryKind::kHost, 0}};
    return core::EncodeMeta(m);
  }
  int handshakes() const { return handshakes_.load(); }
  int finished() const { return finished_.load(); }
  uint64_t bytes_after_reply() const { return bytes_after_.load(); }

 private:
  void Serve(core::Fd c) {
    if (!AcceptAnyHello(c.get(), agent_id_, RandomSecret())) return;
    ++handshakes_;
    char buf[4096];  // whatever the initiator sends next, until it closes
    while (core::WaitReadable(c.get(), 3000ms).ok()) {
      ssize_t n = recv(c.get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0) break;
      bytes_after_ += static_cast<uint64_t>(n);
    }
    ++finished_;
  }
  const uint64_t agent_id_ = core::RandomU64() | 1;
  std::atomic<int> handshakes_{0};
  std::atomic<int> finished_{0};  // connections read until closed
  std::atomic<uint64_t> bytes_after_{0};
  LoopbackListener listener_{[this](core::Fd c) { Serve(std::move(c)); }};
};

TEST(HandshakeTcp, TargetWithoutTheSecretIsRefusedBeforeAnyFrame) {
  ImpostorTarget impostor;
  std::vector<uint8_t> local(4096, 0x33);
  auto a = Agent::Create(OptionsFor("a", "tcp"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a.value()->RegisterMemory(local.data(), local.size()).ok());
  ASSERT_TRUE(a.value()->LoadPeer(impostor.Blob()).ok());
  auto h = MakeSimple(*a.value(), "impostor", Op::kWrite, local.data(),
                      reinterpret_cast<void*>(1ull << 40), 4096);
  const auto t0 = std::chrono::steady_clock::now();
  Status s = h.ok() ? PostAndWait(*a.value(), &h.value()) : h.status();
  // The transport fails the connect with not-allowed, and so does the agent (every
  // transport it tried refused), naming each transport's reason.
  EXPECT_EQ(s.code(), Code::kNotAllowed) << s.ToString();
  EXPECT_NE(s.message().find("tcp: not-allowed: peer 'impostor' could not prove"),
            std::string::npos)
      << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s)
      << "a failed proof must fail the connect at once";
  a.value().reset();  // closes every connection: the impostor's reads end
  for (int i = 0;
       i < 500 && (impostor.handshakes() == 0 || impostor.finished() < impostor.handshakes()); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_GE(impostor.handshakes(), 1) << "the initiator never reached the proof check";
  EXPECT_EQ(impostor.finished(), impostor.handshakes());
  EXPECT_EQ(impostor.bytes_after_reply(), 0u) << "the initiator sent a frame to an unproven target";
}

// Handshake I/O whose wait succeeds and whose every read fails with `error`:
// a socket error (keepalive or TCP_USER_TIMEOUT gave up) that tests cannot
// provoke on loopback in time.
class FailingReadIo final : public core::HelloIo {
 public:
  explicit FailingReadIo(Status error) : error_(std::move(error)) {}
  Status Send(iovec*, int) override { return Status::Ok(); }
  Status Recv(void*, size_t) override { return error_; }
  Status WaitReadable() override { return Status::Ok(); }

 private:
  const Status error_;
};

// Handshake I/O that plays a target: a valid challenge, then `reply`.
class ScriptedTargetIo final : public core::HelloIo {
 public:
  explicit ScriptedTargetIo(core::StreamHelloReply reply) : reply_(reply) {
    challenge_.magic = core::kChallengeMagic;
    challenge_.version = core::kWireVersion;
  }
  Status Send(iovec*, int) override { return Status::Ok(); }
  Status Recv(void* buf, size_t len) override {
    const bool first = reads_++ == 0;
    const size_t want = first ? sizeof(challenge_) : sizeof(reply_);
    if (len != want || reads_ > 2) return Status::Backend("unexpected read");
    std::memcpy(buf, first ? static_cast<const void*>(&challenge_) : &reply_, len);
    return Status::Ok();
  }
  Status WaitReadable() override { return Status::Ok(); }

 private:
  core::ChallengeFrame challenge_{};
  const core::StreamHelloReply reply_;
  int reads_ = 0;
};

core::AgentMeta TargetMeta(uint16_t port) {
  core::AgentMeta m;
  m.name = "t";
  m.agent_id = core::RandomU64() | 1;
  m.secret = RandomSecret();
  m.tcp_host = "127.0.0.1";
  m.tcp_port = port;
  return m;
}

// Connects to a loopback listener that ends each connection at once (with an
// RST when `reset`, else a clean close) and runs the initiator's handshake.
Status HelloToAClosingListener(bool reset) {
  LoopbackListener listener([reset](core::Fd c) {
    if (reset) {
      const linger abort{1, 0};  // close sends an RST
      setsockopt(c.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    }
  });
  auto fd = core::ConnectTcp("127.0.0.1", listener.port(), 2s);
  if (!fd.ok()) return fd.status();
  core::DeadlineIo io(fd->get(), core::DeadlineIn(2000ms));
  return core::SayHello("a", TargetMeta(listener.port()), core::ConnRole::kLane, io);
}

bool Says(const Status& s, const char* text) { return s.message().find(text) != std::string::npos; }

constexpr const char* kNoChallengeHint = "closed the connection without a challenge";

TEST(HandshakeErrors, TimeoutBeforeTheChallengeSaysTimedOut) {
  FailingReadIo io(core::IoError("recvmsg", ETIMEDOUT));
  const Status s = core::SayHello("a", TargetMeta(1), core::ConnRole::kLane, io);
  EXPECT_EQ(s.code(), Code::kRemoteDisconnect) << s.ToString();
  EXPECT_TRUE(Says(s, "timed out")) << s.ToString();
  EXPECT_FALSE(Says(s, kNoChallengeHint)) << s.ToString();
}

TEST(HandshakeErrors, ResetBeforeTheChallengeSaysReset) {
  const Status s = HelloToAClosingListener(/*reset=*/true);
  EXPECT_EQ(s.code(), Code::kRemoteDisconnect) << s.ToString();
  EXPECT_TRUE(Says(s, "reset")) << s.ToString();
  EXPECT_FALSE(Says(s, kNoChallengeHint)) << s.ToString();
}

TEST(HandshakeErrors, CleanCloseBeforeTheChallengeKeepsTheHint) {
  const Status s = HelloToAClosingListener(/*reset=*/false);
  EXPECT_EQ(s.code(), Code::kRemoteDisconnect) << s.ToString();
  EXPECT_TRUE(Says(s, kNoChallengeHint)) << s.ToString();
  EXPECT_TRUE(Says(s, "too many connections")) << s.ToString();
}

// A target that failed on its side taking the connection (its PeerConnLimit ran
// out of memory) answers kBackend: the initiator says so, and does not blame its
// own hello or metadata.
TEST(HandshakeErrors, TargetFailingOnItsSideIsNotARefusal) {
  ScriptedTargetIo io({static_cast<int32_t>(Code::kBackend), 0, {}});
  const Status s = core::SayHello("a", TargetMeta(1), core::ConnRole::kLane, io);
  EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
  EXPECT_TRUE(Says(s, "failed to take the connection on its side")) << s.ToString();
  EXPECT_FALSE(Says(s, "stale metadata")) << s.ToString();
}

TEST(HandshakeErrors, RefusedHelloBlamesTheMetadata) {
  ScriptedTargetIo io({static_cast<int32_t>(Code::kNotAllowed), 0, {}});
  const Status s = core::SayHello("a", TargetMeta(1), core::ConnRole::kLane, io);
  EXPECT_EQ(s.code(), Code::kNotAllowed) << s.ToString();
  EXPECT_TRUE(Says(s, "stale metadata")) << s.ToString();
}

}  // namespace
}  // namespace kvlane::test
