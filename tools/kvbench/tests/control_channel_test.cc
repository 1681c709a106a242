#include "control_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "control_secret.h"
#include "json_field.h"
#include "loopback_listener.h"

namespace kvbench {
namespace {

using std::chrono::milliseconds;

struct Pair {
  std::unique_ptr<ControlChannel> a, b;
};

Pair Connect() {
  testing::LoopbackListener l = testing::ListenOnLoopback();
  if (!l.listener) std::abort();  // its failure is reported; every caller needs a pair
  auto accepted =
      std::async(std::launch::async, [&] { return l.listener->Accept(milliseconds(5000)); });
  auto b = ControlChannel::Connect(l.peer, milliseconds(5000));
  auto a = accepted.get();
  EXPECT_TRUE(a.ok() && b.ok());
  return {std::move(a).value(), std::move(b).value()};
}

TEST(ControlChannel, MessagesRoundTrip) {
  Pair p = Connect();
  ASSERT_TRUE(p.a->Send({{"type", "hello"}, {"n", 42}}).ok());
  auto m = p.b->Expect("hello");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)["n"], 42);
  std::string big(1 << 20, 'x');
  ASSERT_TRUE(p.b->Send({{"type", "big"}, {"s", big}}).ok());
  EXPECT_EQ(p.a->Expect("big").value()["s"], big);
}

// Keys of a sealed pair: a sends with ka, b with kb.
const std::string ka(32, 'a'), kb(32, 'b');

// Sealed ends exchange messages both ways, big ones too, and raw bytes still
// pass as they are.
TEST(ControlChannel, SealedMessagesRoundTrip) {
  Pair p = Connect();
  p.a->Seal(ka, kb);
  p.b->Seal(kb, ka);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(p.a->Send({{"type", "ping"}, {"i", i}}).ok());
    auto m = p.b->Expect("ping");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)["i"], i);
    ASSERT_TRUE(p.b->Send({{"type", "pong"}, {"i", i}}).ok());
    ASSERT_TRUE(p.a->Expect("pong").ok());
  }
  std::string big(3 << 20, 'x');
  ASSERT_TRUE(p.b->Send({{"type", "big"}, {"s", big}}).ok());
  EXPECT_EQ(p.a->Expect("big").value()["s"], big);
  std::vector<uint8_t> out(1 << 16, 9), in(1 << 16, 0);
  ASSERT_TRUE(p.a->SendRaw(out.data(), out.size()).ok());
  ASSERT_TRUE(p.b->ReceiveRaw(in.data(), in.size()).ok());
  EXPECT_EQ(in, out);
  ASSERT_TRUE(p.a->Send({{"type", "after"}}).ok());
  EXPECT_TRUE(p.b->Expect("after").ok());
}

// A wait on a sealed end given up on a stop (nothing read) spends no message
// number: the next message is still taken.
TEST(ControlChannel, AStoppedWaitOnASealedEndKeepsTheNumbering) {
  Pair p = Connect();
  p.a->Seal(ka, kb);
  p.b->Seal(kb, ka);
  auto stopped = p.b->Receive([] { return true; });
  EXPECT_EQ(stopped.status().code(), kvlane::Code::kCanceled);
  EXPECT_FALSE(p.b->aborted());
  ASSERT_TRUE(p.a->Send({{"type", "next"}}).ok());
  EXPECT_TRUE(p.b->Expect("next").ok());
}

// A sealed Send that stops part-way (here: the peer reads nothing and the send
// buffers fill) spends its number: the channel aborts, so it sends nothing more,
// and the peer's wait on the cut message ends as a disconnect, not as a wait for
// bytes that never come or as a later message taken out of order.
TEST(ControlChannel, ASealedSendThatFailsPartWayAbortsBothEnds) {
  Pair p = Connect();
  p.a->Seal(ka, kb);
  p.b->Seal(kb, ka);
  p.a->set_timeout(milliseconds(300));
  const std::string big(64 << 20, 'x');  // far above what loopback buffers hold
  const kvlane::Status s = p.a->Send({{"type", "big"}, {"s", big}});
  ASSERT_EQ(s.code(), kvlane::Code::kTimeout) << s.ToString();
  EXPECT_TRUE(p.a->aborted());
  EXPECT_EQ(p.a->Send({{"type", "next"}}).code(), kvlane::Code::kCanceled);
  auto m = p.b->Receive();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), kvlane::Code::kRemoteDisconnect) << m.status().ToString();
  EXPECT_TRUE(p.b->aborted());
}

// What reaches a sealed end as a frame of `body` and `mac`, written raw by a
// man in the middle on the unsealed end.
kvlane::Status Forged(ControlChannel& raw, const std::string& body, const std::string& mac) {
  const uint32_t len = htonl(static_cast<uint32_t>(body.size()));
  std::string frame(reinterpret_cast<const char*>(&len), sizeof(len));
  frame += body + mac;
  return raw.SendRaw(frame.data(), frame.size());
}

// A sealed end takes a message only with the MAC of its key and number: a forged,
// replayed, skipped-ahead or reflected one fails (kInvalidArgument) and aborts
// the channel.
TEST(ControlChannel, ASealedEndRefusesForgedReplayedAndReflectedMessages) {
  const std::string body = R"({"type":"done","valid":true})";
  struct Case {
    const char* what;
    std::vector<std::string> macs;  // sent in turn; the last must be refused
  };
  const Case cases[] = {
      {"no key", {std::string(32, '\0')}},
      {"replayed", {MessageMac(ka, 0, body), MessageMac(ka, 0, body)}},
      {"skipped ahead", {MessageMac(ka, 1, body)}},
      {"reflected", {MessageMac(kb, 0, body)}},
      {"short", {MessageMac(ka, 0, body).substr(0, 16) + std::string(16, 'x')}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Pair p = Connect();  // a stays unsealed: the forger
    p.b->Seal(kb, ka);
    for (size_t i = 0; i < c.macs.size(); ++i) {
      ASSERT_TRUE(Forged(*p.a, body, c.macs[i]).ok());
      auto m = p.b->Receive();
      if (i + 1 < c.macs.size()) {
        ASSERT_TRUE(m.ok()) << m.status().ToString();
        continue;
      }
      ASSERT_FALSE(m.ok());
      EXPECT_EQ(m.status().code(), kvlane::Code::kInvalidArgument);
      EXPECT_NE(m.status().message().find("failed its MAC"), std::string::npos)
          << m.status().message();
      EXPECT_TRUE(p.b->aborted());
    }
  }
}

TEST(ControlChannel, RawBytes) {
  Pair p = Connect();
  std::vector<uint8_t> out(3 << 20, 7), in(3 << 20, 0);
  std::thread sender([&] { ASSERT_TRUE(p.a->SendRaw(out.data(), out.size()).ok()); });
  ASSERT_TRUE(p.b->ReceiveRaw(in.data(), in.size()).ok());
  sender.join();
  EXPECT_EQ(in, out);
}

TEST(ControlChannel, SilentPeerTimesOut) {
  Pair p = Connect();
  p.b->set_timeout(milliseconds(100));
  auto m = p.b->Receive();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), kvlane::Code::kTimeout);
}

// A wait given up on a stop reads nothing: the message that comes later is read
// whole by the next Receive. Pending tells of it without reading it.
TEST(ControlChannel, AWaitGivenUpOnAStopLeavesTheNextMessageWhole) {
  Pair p = Connect();
  int asked = 0;
  auto m = p.b->Receive([&] { return ++asked == 2; });
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), kvlane::Code::kCanceled);
  EXPECT_EQ(asked, 2);  // once per kStopPoll
  EXPECT_FALSE(p.b->aborted());
  EXPECT_FALSE(p.b->Pending());
  ASSERT_TRUE(p.a->Send({{"type", "abandon"}}).ok());
  for (int i = 0; i < 500 && !p.b->Pending(); ++i) std::this_thread::sleep_for(milliseconds(2));
  EXPECT_TRUE(p.b->Pending());
  EXPECT_TRUE(p.b->Expect("abandon").ok());
  EXPECT_FALSE(p.b->Pending());
  // A stop that never answers true leaves the wait to the timeout.
  p.b->set_timeout(milliseconds(250));
  auto silent = p.b->Receive([] { return false; });
  ASSERT_FALSE(silent.ok());
  EXPECT_EQ(silent.status().code(), kvlane::Code::kTimeout);
}

TEST(ControlChannel, ClosedPeerIsADisconnect) {
  Pair p = Connect();
  p.a.reset();
  auto m = p.b->Receive();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), kvlane::Code::kRemoteDisconnect);
}

TEST(ControlChannel, AbortEndsThePeersRawWaitAtOnce) {
  Pair p = Connect();
  p.b->set_timeout(milliseconds(20000));
  // Apart: the waiting thread writes `in` while this one sends from `out`.
  std::vector<uint8_t> in(1 << 20), out(1000);
  auto waiting =
      std::async(std::launch::async, [&] { return p.b->ReceiveRaw(in.data(), in.size()); });
  ASSERT_TRUE(p.a->SendRaw(out.data(), out.size()).ok());  // partway, then give up
  p.a->Abort();
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(waiting.get().code(), kvlane::Code::kRemoteDisconnect);
  EXPECT_TRUE(p.a->aborted());
  EXPECT_EQ(p.a->Send({{"type", "done"}}).code(), kvlane::Code::kCanceled);
  EXPECT_EQ(p.a->Receive().status().code(), kvlane::Code::kCanceled);
}

TEST(ControlChannel, LocalAddressIsThisEndsInterface) {
  Pair p = Connect();  // over 127.0.0.1
  auto a = p.a->LocalAddress();
  auto b = p.b->LocalAddress();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, "127.0.0.1");
  EXPECT_EQ(*b, "127.0.0.1");
}

TEST(ControlChannel, UnexpectedAndErrorMessages) {
  Pair p = Connect();
  ASSERT_TRUE(p.a->Send({{"type", "other"}}).ok());
  EXPECT_FALSE(p.b->Expect("hello").ok());
  ASSERT_TRUE(p.a->Send({{"type", "error"}, {"message", "boom"}}).ok());
  auto m = p.b->Expect("hello");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("boom"), std::string::npos);
}

// A reply that may be either of two messages (the target's "ready", or "stopped"
// once a stop signal reached it): either is taken, anything else named.
TEST(ControlChannel, ExpectOneOfTakesAnyOfItsTypes) {
  Pair p = Connect();
  ASSERT_TRUE(p.a->Send({{"type", "stopped"}, {"signal", "SIGINT"}}).ok());
  auto m = p.b->ExpectOneOf({"ready", "stopped"});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)["signal"], "SIGINT");
  ASSERT_TRUE(p.a->Send({{"type", "ready"}}).ok());
  EXPECT_TRUE(p.b->ExpectOneOf({"ready", "stopped"}).ok());
  ASSERT_TRUE(p.a->Send({{"type", "verdict"}}).ok());
  m = p.b->ExpectOneOf({"ready", "stopped"});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "control: expected 'ready' or 'stopped', got 'verdict'");
}

// JsonDepth counts arrays and objects, not brackets inside strings.
TEST(ControlChannel, JsonDepthCountsNestingOutsideStrings) {
  EXPECT_EQ(JsonDepth(R"({"type":"x"})"), 1);
  EXPECT_EQ(JsonDepth(R"({"a":[{"b":[1,2]},[]]})"), 4);
  EXPECT_EQ(JsonDepth(R"({"a":"[[[{{{\"[[["})"), 1);
  EXPECT_EQ(JsonDepth("7"), 0);
}

// A peer's message nested deeper than any kvbench sends is refused before it is
// parsed: nlohmann's dump and copy of a value recurse, so [[[[...]]]] 100,000
// levels deep would overflow the stack of whoever quoted it.
TEST(ControlChannel, AMessageNestedTooDeeplyIsRefused) {
  Pair p = Connect();
  auto& a = p.a;
  auto& b = p.b;
  std::string deep =
      "{\"type\":\"x\",\"v\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  const uint32_t len = htonl(static_cast<uint32_t>(deep.size()));
  ASSERT_TRUE(a->SendRaw(&len, sizeof(len)).ok());
  ASSERT_TRUE(a->SendRaw(deep.data(), deep.size()).ok());
  auto got = b->Receive();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), kvlane::Code::kInvalidArgument);
  EXPECT_NE(got.status().message().find("nested too deeply"), std::string::npos);
  ASSERT_TRUE(
      a->Send({{"type", "plan"}, {"plan", {{"points", {{{"demand", {{{"n", 1}}}}}}}}}}).ok());
  EXPECT_TRUE(b->Receive().ok()) << "a message as deep as kvbench's own is taken";
}

// The waits below are long next to the notices' period: a stall of the waiting
// thread (a loaded machine) runs the notices it missed as one, so only a count
// well below the 14 due must be asked for. Two still says it keeps reporting.
TEST(ControlChannel, NoListenerTimesOutOnConnect) {
  testing::RefusingPort refusing;
  ASSERT_NE(refusing.port(), 0);
  std::vector<milliseconds> notices;
  auto c = ControlChannel::Connect(
      "127.0.0.1:" + std::to_string(refusing.port()), milliseconds(1500),
      {[&](milliseconds waited) { notices.push_back(waited); }, milliseconds(100)});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), kvlane::Code::kTimeout);
  EXPECT_NE(c.status().message().find("nothing listening"), std::string::npos)
      << c.status().message();
  // One notice per 100 ms of waiting (at most), each later than the last.
  ASSERT_GE(notices.size(), 2u);
  EXPECT_LE(notices.size(), 15u);
  EXPECT_GE(notices.front(), milliseconds(100));
  for (size_t i = 1; i < notices.size(); ++i) EXPECT_GT(notices[i], notices[i - 1]);
}

TEST(ControlChannel, AcceptSaysItIsWaitingThenTimesOut) {
  testing::LoopbackListener l = testing::ListenOnLoopback();
  ASSERT_TRUE(l.listener);
  int notices = 0;
  const auto start = std::chrono::steady_clock::now();
  auto a =
      l.listener->Accept(milliseconds(1500), {[&](milliseconds) { ++notices; }, milliseconds(100)});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), kvlane::Code::kTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(1500));
  // 14 due; fewer after a stall (see NoListenerTimesOutOnConnect).
  EXPECT_GE(notices, 2);
  EXPECT_LE(notices, 15);
}

TEST(ControlChannel, AcceptStillTakesAPeerThatComesAfterANotice) {
  testing::LoopbackListener l = testing::ListenOnLoopback();
  ASSERT_TRUE(l.listener);
  std::atomic<int> notices{0};
  auto accepted = std::async(std::launch::async, [&] {
    return l.listener->Accept(milliseconds(5000),
                              {[&](milliseconds) { ++notices; }, milliseconds(50)});
  });
  // Until the first notice (or Accept ended early).
  while (notices.load() == 0 && accepted.wait_for(milliseconds(5)) != std::future_status::ready) {
  }
  auto b = ControlChannel::Connect(l.peer, milliseconds(5000));
  auto a = accepted.get();
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_TRUE((*b)->Send({{"type", "hello"}}).ok());
  EXPECT_TRUE((*a)->Expect("hello").ok());
}

// A listener whose accept queue is full: Linux drops further SYNs to it, so a
// connect there gets no answer at all, as from a host behind a firewall that
// drops them. Owns its sockets.
class DeafListener {
 public:
  DeafListener() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    port_ = testing::BindLoopback(listener_);
    EXPECT_NE(port_, 0);
    EXPECT_EQ(listen(listener_, 0), 0);
    const sockaddr_in a = testing::LoopbackAddress(port_);
    // Connect without accepting until one connect stays unanswered: the queue is full.
    for (int i = 0; i < 16 && !full_; ++i) {
      int f = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      fills_.push_back(f);
      (void)connect(f, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
      pollfd p{f, POLLOUT, 0};
      full_ = poll(&p, 1, 200) == 0;
    }
  }
  ~DeafListener() {
    for (int f : fills_) close(f);
    close(listener_);
  }
  bool full() const { return full_; }
  uint16_t port() const { return port_; }

 private:
  int listener_ = -1;
  uint16_t port_ = 0;
  bool full_ = false;
  std::vector<int> fills_;
};

TEST(ControlChannel, ConnectToAPeerThatNeverAnswersEndsByTheTimeout) {
  DeafListener deaf;
  ASSERT_TRUE(deaf.full()) << "could not fill the listener's accept queue";
  int notices = 0;
  const auto start = std::chrono::steady_clock::now();
  auto c = ControlChannel::Connect("127.0.0.1:" + std::to_string(deaf.port()), milliseconds(1500),
                                   {[&](milliseconds) { ++notices; }, milliseconds(100)});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), kvlane::Code::kTimeout) << c.status().ToString();
  EXPECT_NE(c.status().message().find("no answer"), std::string::npos) << c.status().message();
  // By the timeout, not after the kernel's SYN retries (a blocking connect: ~2 min).
  EXPECT_GE(took, milliseconds(1500));
  EXPECT_LT(took, std::chrono::seconds(10));
  // 14 due; fewer after a stall (see NoListenerTimesOutOnConnect).
  EXPECT_GE(notices, 2);
}

// A socket bound to a loopback port and connected to that same port meets its
// own SYN (a simultaneous open): connected, to itself. A connect to a rank not
// listening yet can end so when the kernel picks the port as its source; the
// connect then counts as refused. An ordinary connection is not one.
TEST(ControlChannel, ASocketConnectedToItselfIsToldApart) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
  EXPECT_TRUE(ConnectedToItself(fd));
  close(fd);
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  a.sin_port = 0;
  len = sizeof(a);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
  int served = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(served, 0);
  EXPECT_FALSE(ConnectedToItself(client));
  EXPECT_FALSE(ConnectedToItself(served));
  EXPECT_FALSE(ConnectedToItself(listener));  // not connected at all
  for (int f : {served, client, listener}) close(f);
}

// A listener handed down by a launcher is taken over and accepts as one it
// opened itself; a descriptor that is no listening socket is refused and left open.
TEST(ControlChannel, AHandedDownListenerIsTakenOverAndNothingElseIs) {
  auto opened = ControlListener::Listen("127.0.0.1:0");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const uint16_t port = opened.value()->Port().value();
  ASSERT_GT(port, 0);
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  const int fd = opened.value()->Release();
  ASSERT_GE(fd, 0);
  opened.value().reset();  // released: the socket stays open
  fcntl(fd, F_SETFD, 0);   // as a spawned rank inherits it
  auto adopted = ControlListener::Adopt(fd, addr);
  ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
  EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_EQ(adopted.value()->Port().value(), port);
  auto connected = std::async(std::launch::async,
                              [&] { return ControlChannel::Connect(addr, milliseconds(5000)); });
  auto accepted = adopted.value()->Accept(milliseconds(5000));
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  auto b = connected.get();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(b.value()->Send({{"type", "hello"}}).ok());
  auto got = accepted.value()->Receive();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value()["type"], "hello");

  int unbound = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  for (int bad : {unbound, pipe_fds[0], 1000000}) {
    auto refused = ControlListener::Adopt(bad, addr);
    EXPECT_EQ(refused.status().code(), kvlane::Code::kInvalidArgument) << bad;
  }
  EXPECT_EQ(fcntl(unbound, F_GETFD) >= 0, true) << "a refused descriptor was closed";
  for (int f : {unbound, pipe_fds[0], pipe_fds[1]}) close(f);
}

TEST(ControlChannel, SplitHostPort) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(SplitHostPort("10.0.0.1:5000", &host, &port).ok());
  EXPECT_EQ(host, "10.0.0.1");
  EXPECT_EQ(port, 5000);
  EXPECT_FALSE(SplitHostPort("nohost", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort("h:99999", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort("h:12ab", &host, &port).ok());
}

}  // namespace
}  // namespace kvbench
