// Session::Open's agreement on the data path (transport and pool memory): ranks
// that resolve differently stop before either allocates a pool, and a rank that
// cannot resolve tells its peer why.
#include "session.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "device_memory.h"
#include "hello.h"
#include "loopback_listener.h"
#include "session_pair.h"
#include "target_loop.h"

namespace kvbench {
namespace {

using testing::OpenBoth;
using testing::RankConfig;
using testing::RankZeroOn;
using testing::SessionPair;

// A listener on 127.0.0.1 that is not a kvbench rank: it accepts one connection
// (waiting at most 20 s for it), reads the client's first message whole (a length
// and that many bytes), answers `reply` and closes; with an empty `reply` it says
// nothing and closes once the client did. Returns the port.
uint16_t ForeignListener(const std::string& reply, std::future<void>* served) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *served = std::async(std::launch::async, [fd, reply] {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20000) == 1) {
      int c = accept(fd, nullptr, nullptr);
      auto read_all = [c](void* buf, size_t n) {
        auto* b = static_cast<char*>(buf);
        while (n > 0) {
          ssize_t got = recv(c, b, n, 0);
          if (got <= 0) return false;
          b += got;
          n -= static_cast<size_t>(got);
        }
        return true;
      };
      uint32_t body = 0;
      if (read_all(&body, sizeof(body))) {
        std::string hello(ntohl(body), '\0');
        (void)read_all(hello.data(), hello.size());
      }
      if (!reply.empty()) (void)send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      char sink;
      while (reply.empty() && recv(c, &sink, 1, 0) > 0) {
      }
      close(c);
    }
    close(fd);
  });
  return ntohs(a.sin_port);
}

// The initiator pointed at a port where something else listens (here a web
// server's answer): the handshake names the likely mistake, not only the framing.
TEST(SessionHandshake, AForeignListenerIsNamedAsNotAKvbenchRank) {
  std::future<void> served;
  const std::string peer =
      "127.0.0.1:" + std::to_string(ForeignListener("HTTP/1.1 400 Bad Request\r\n\r\n", &served));
  auto s = Session::Open(RankConfig(1, peer, {"--transport", "tcp"}));
  served.get();
  ASSERT_FALSE(s.ok());
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("the listener at " + peer + " did not answer with a kvbench hello"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("oversized message"), std::string::npos) << m;  // the cause kept
  EXPECT_NE(m.find("--peer"), std::string::npos) << m;
}

// A listener that accepts and says nothing (a service waiting for its own
// protocol's request): the hello's timeout names the likely mistake.
TEST(SessionHandshake, ASilentListenerIsNamedAsNotAKvbenchRank) {
  std::future<void> served;
  const std::string peer = "127.0.0.1:" + std::to_string(ForeignListener("", &served));
  RunConfig c = RankConfig(1, peer, {"--transport", "tcp"});
  c.control_timeout_ms = std::chrono::milliseconds(500);
  auto s = Session::Open(c);
  served.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), kvlane::Code::kTimeout) << s.status().ToString();
  EXPECT_NE(s.status().message().find("the listener at " + peer + " sent no hello"),
            std::string::npos)
      << s.status().message();
}

// A client connected to 127.0.0.1:`port` once something listens there (retrying
// for up to 10 s); -1 when nothing did.
int ConnectWhenListening(uint16_t port) {
  const sockaddr_in a = testing::LoopbackAddress(port);
  for (int i = 0; i < 1000; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) return fd;
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

// Rank 0 opening on a thread of its own, with control timeout `timeout`, and a
// stray client connected to it once it listens (stray < 0: it never did).
struct TargetAndStray {
  std::string peer;
  std::future<testing::SessionOrError> target;
  int stray = -1;
};

TargetAndStray StartTargetAndAStray(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  testing::LoopbackListener l = testing::ListenOnLoopback();
  TargetAndStray t;
  t.peer = l.peer;
  RunConfig c = RankZeroOn(l, {"--transport", "tcp"});
  c.control_timeout_ms = timeout;
  t.target = std::async(std::launch::async, [c] { return Session::Open(c); });
  t.stray = ConnectWhenListening(l.port);
  return t;
}

// Rank 0 takes whatever connects first. A stray client (here one speaking HTTP,
// which then hangs up) is dropped, and rank 0 listens again: the real initiator
// that connects next opens the run.
TEST(SessionHandshake, TheTargetDropsAStrayConnectionAndListensAgain) {
  auto [peer, target, stray] = StartTargetAndAStray();
  ASSERT_GE(stray, 0) << "rank 0 never listened";
  const std::string request = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(send(stray, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  close(stray);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the accept window shrinks
  auto initiator = Session::Open(RankConfig(1, peer, {"--transport", "tcp"}));
  auto t = target.get();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(initiator.ok()) << initiator.status().ToString();
  // Each later wait gets the whole control timeout, not what the accept had left
  // after the stray (it was the run's per-wait timeout).
  EXPECT_EQ((*t)->control().timeout(), std::chrono::milliseconds(20000));
}

// A stray that connects and says nothing holds rank 0 for kHelloWait (10 s); the
// real initiator connecting meanwhile waits in the listener's queue (and for rank
// 0's hello, its whole control timeout) and opens the run once the stray is dropped.
TEST(SessionHandshake, ARankOneQueuedBehindASilentStrayOpensTheRun) {
  auto [peer, target, stray] = StartTargetAndAStray();
  ASSERT_GE(stray, 0) << "rank 0 never listened";
  const auto t0 = std::chrono::steady_clock::now();
  auto initiator = Session::Open(RankConfig(1, peer, {"--transport", "tcp"}));
  const auto took = std::chrono::steady_clock::now() - t0;
  auto t = target.get();
  close(stray);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(initiator.ok()) << initiator.status().ToString();
  EXPECT_GE(took, kHelloWait - std::chrono::seconds(1)) << "the silent stray was not waited for";
}

// Rank 0 whose control timeout passes with only strays connected: its error says
// how many it dropped and why the last one was.
TEST(SessionHandshake, TheTargetsTimeoutCountsTheConnectionsItDropped) {
  auto [peer, target, stray] = StartTargetAndAStray(std::chrono::milliseconds(1500));
  ASSERT_GE(stray, 0) << "rank 0 never listened";
  const std::string junk = "\xff\xff\xff\xff";  // a "length" far past any hello
  ASSERT_EQ(send(stray, junk.data(), junk.size(), MSG_NOSIGNAL), 4);
  auto t = target.get();
  close(stray);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), kvlane::Code::kTimeout) << t.status().ToString();
  const std::string& m = t.status().message();
  EXPECT_NE(m.find("no kvbench rank 1 said hello on " + peer +
                   " within 1500 ms (1 connection(s) "
                   "dropped"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("oversized message"), std::string::npos) << m;
}

// Rank 0 whose flags fail before it connects (a pool budget no row fits) closes
// the listener handed to it: a rank 1 connecting then is refused at once, not
// taken into a queue nobody accepts from until its control timeout.
TEST(SessionHandshake, FlagsFailingBeforeTheHandshakeCloseAHandedOverListener) {
  testing::LoopbackListener l = testing::ListenOnLoopback();
  ASSERT_TRUE(l.listener);
  RunConfig c = RankZeroOn(l, {"--transport", "tcp", "--pool-budget", "4KiB"});
  auto s = Session::Open(c);
  ASSERT_FALSE(s.ok());
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in a = testing::LoopbackAddress(l.port);
  EXPECT_NE(connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(errno, ECONNREFUSED);
  close(fd);
}

// A peer speaking another control protocol (here: a hello without one, as from a
// build before it was introduced) is refused at the handshake, naming both builds.
TEST(SessionHandshake, APeerOfAnotherProtocolIsRefused) {
  testing::LoopbackListener l = testing::ListenOnLoopback();
  ASSERT_TRUE(l.listener);
  const std::string peer = l.peer;
  auto fake = std::async(std::launch::async, [&] {
    auto c = l.listener->Accept(std::chrono::seconds(20));
    if (!c.ok()) return c.status();
    KVLANE_RETURN_IF_ERROR((*c)->Send({{"type", "hello"}, {"rank", 0}, {"role", "target"}}));
    return (*c)->Expect("hello").status();
  });
  auto s = Session::Open(RankConfig(1, peer, {"--transport", "tcp"}));
  EXPECT_TRUE(fake.get().ok());
  ASSERT_FALSE(s.ok());
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("control protocol none"), std::string::npos) << m;
  EXPECT_NE(m.find("run the same build on both ranks"), std::string::npos) << m;
}

// A hello is untrusted: fields of other types are refused (protocol, rank) or
// left out (role, host, devices), never thrown on.
TEST(SessionHandshake, AHelloIsReadFieldByField) {
  RankInfo peer;
  const nlohmann::json good = {{"type", "hello"},
                               {"protocol", kControlProtocol},
                               {"rank", 0},
                               {"role", "target"},
                               {"hostname", "h0"},
                               {"devices", {"host"}},
                               {"version", "kvlane 9.9 (abc)"}};
  ASSERT_TRUE(ReadHello(1, good, &peer).ok());
  EXPECT_EQ(peer.rank, 0);
  EXPECT_EQ(peer.hostname, "h0");
  EXPECT_EQ(peer.devices, std::vector<std::string>{"host"});
  EXPECT_EQ(peer.version, "kvlane 9.9 (abc)");  // the peer's build, for the document

  nlohmann::json odd = good;
  odd["hostname"] = 7;
  odd["role"] = nlohmann::json::array();
  odd["devices"] = {"host", 3, nullptr};
  ASSERT_TRUE(ReadHello(1, odd, &peer).ok());
  EXPECT_EQ(peer.hostname, "");
  EXPECT_EQ(peer.role, "");
  EXPECT_EQ(peer.devices, std::vector<std::string>{"host"});
  odd["devices"] = "host";
  ASSERT_TRUE(ReadHello(1, odd, &peer).ok());
  EXPECT_TRUE(peer.devices.empty());
  // Text goes into messages and documents: printable ASCII, cut at 255 bytes.
  odd["hostname"] = "h\x1b[2J" + std::string(1000, 'x');
  odd["devices"] = std::vector<std::string>(1000, "cuda:0\n");
  ASSERT_TRUE(ReadHello(1, odd, &peer).ok());
  EXPECT_EQ(peer.hostname.substr(0, 6), "h?[2Jx");
  EXPECT_EQ(peer.hostname.size(), 255u + 3);  // and "..."
  EXPECT_EQ(peer.devices.size(), 64u);
  EXPECT_EQ(peer.devices[0], "cuda:0?");

  for (const nlohmann::json& rank : {nlohmann::json("zero"), nlohmann::json(1), nlohmann::json(-1),
                                     nlohmann::json(0.0), nlohmann::json()}) {
    nlohmann::json bad = good;
    bad["rank"] = rank;
    const kvlane::Status s = ReadHello(1, bad, &peer);
    EXPECT_EQ(s.code(), kvlane::Code::kInvalidArgument) << rank.dump();
    EXPECT_NE(s.message().find("claims rank"), std::string::npos) << s.message();
  }
  nlohmann::json other = good;
  other["protocol"] = kControlProtocol + 1;
  other["version"] = "kvlane 9.9.9 (git abc)";
  const kvlane::Status s = ReadHello(1, other, &peer);
  EXPECT_NE(s.message().find("kvbench kvlane 9.9.9 (git abc) (control protocol " +
                             std::to_string(kControlProtocol + 1) + ")"),
            std::string::npos)
      << s.message();
  other["protocol"] = "2";
  EXPECT_FALSE(ReadHello(1, other, &peer).ok());
  // Builds of protocol 1 (no 'busy' during prepare, no boot id in the plan, no
  // timeout in the row), 2 (no MAC on sealed messages) and 3 (one check per row:
  // its injected faults would act on the second) are refused at the handshake,
  // not mid-run.
  EXPECT_EQ(kControlProtocol, 4);
  for (int old : {1, 2, 3}) {
    other["protocol"] = old;
    EXPECT_EQ(ReadHello(1, other, &peer).code(), kvlane::Code::kInvalidArgument) << old;
  }
}

// A fake rank 0: says its hello, then answers each message of rank 1 by `answer`
// (nothing when it returns null) until rank 1 closes.
std::future<void> FakeTarget(std::unique_ptr<ControlListener> listener,
                             std::function<nlohmann::json(const nlohmann::json&)> answer) {
  return std::async(std::launch::async, [listener = std::move(listener), answer] {
    ASSERT_TRUE(listener);
    auto c = listener->Accept(std::chrono::seconds(20));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE((*c)->Send({{"type", "hello"},
                            {"protocol", kControlProtocol},
                            {"rank", 0},
                            {"role", "target"},
                            {"hostname", HostName()},
                            {"devices", {"host"}}})
                    .ok());
    for (;;) {
      auto m = (*c)->Receive();
      if (!m.ok()) return;
      const nlohmann::json reply = answer(*m);
      if (!reply.is_null() && !(*c)->Send(reply).ok()) return;
    }
  });
}

// Rank 1 reads rank 0's path and plan messages as untrusted: a "path" or "plan"
// of another type, a seed that is a string, budget fields of other types end the
// open with kInvalidArgument (it used to throw from inside the JSON library), and
// the peer's part of the error is cut and printable.
TEST(SessionHandshake, APeersMalformedMessagesEndTheOpenWithAnError) {
  const auto swapped = [](const nlohmann::json& mine) {
    nlohmann::json p = mine;
    p["memory"] = mine.value("peer_memory", "");
    p["peer_memory"] = mine.value("memory", "");
    return p;
  };
  struct Scene {
    nlohmann::json path;  // null: rank 1's own, swapped (agreed)
    nlohmann::json plan;  // null: rank 1's own (agreed)
    std::vector<std::string> flags;
    std::string says;
  };
  const std::string long_text(4000, '\x01');
  const std::vector<std::string> tcp = {"--transport", "tcp"};
  // An empty --pool-budget leaves it automatic: the peer's budget message is read.
  const std::vector<std::string> automatic = {"--transport", "tcp", "--pool-budget", ""};
  for (const Scene& scene :
       {Scene{7, nullptr, tcp, "disagree on the data path"},
        Scene{{{"transport", long_text}}, nullptr, tcp, "disagree on the data path"},
        Scene{nullptr, 5, tcp, "disagree on the plan"},
        Scene{nullptr, 5, automatic, "disagree on the plan"},
        Scene{nullptr, nullptr, tcp, "disagree on --seed (this rank 1, peer none)"}}) {
    testing::LoopbackListener l = testing::ListenOnLoopback();
    const std::string peer = l.peer;
    auto fake = FakeTarget(std::move(l.listener), [&](const nlohmann::json& m) -> nlohmann::json {
      const std::string type = m.value("type", "");
      if (type == "path")
        return {{"type", "path"}, {"path", scene.path.is_null() ? swapped(m["path"]) : scene.path}};
      if (type == "budget")
        return {{"type", "budget"}, {"auto", "yes"}, {"device", "x"}, {"host_budget", -5}};
      if (type == "plan")
        return {{"type", "plan"},
                {"plan", scene.plan.is_null() ? m["plan"] : scene.plan},
                {"seed", "1"}};
      return nullptr;
    });
    auto opened = Session::Open(RankConfig(1, peer, scene.flags));
    ASSERT_FALSE(opened.ok()) << scene.says;
    EXPECT_EQ(opened.status().code(), kvlane::Code::kInvalidArgument) << opened.status().ToString();
    EXPECT_NE(opened.status().message().find(scene.says), std::string::npos)
        << opened.status().message();
    EXPECT_LT(opened.status().message().size(), 2000u) << "the peer's text was not cut";
    EXPECT_EQ(opened.status().message().find('\x01'), std::string::npos);
    fake.get();  // rank 1 closed its end when its open failed
  }
}

// The row's control_timeout_ms is the initiator's, untrusted: the smaller timeout
// sets the target's "busy" pace; a negative wrapped (value<long> of -1 read as a
// tiny or huge wait), a float out of range was undefined. Each is ignored.
TEST(TargetLoop, BusyPaceReadsTheRowsTimeoutAsUntrusted) {
  using std::chrono::milliseconds;
  const milliseconds own{8000};
  EXPECT_EQ(BusyEvery({{"control_timeout_ms", 2000}}, own), milliseconds(500));
  EXPECT_EQ(BusyEvery({{"control_timeout_ms", 60000}}, own), milliseconds(2000));
  for (const nlohmann::json& odd :
       {nlohmann::json(-1), nlohmann::json(0), nlohmann::json(1e300), nlohmann::json(-1e300),
        nlohmann::json("2000"), nlohmann::json(), nlohmann::json(uint64_t(-1))}) {
    EXPECT_EQ(BusyEvery({{"control_timeout_ms", odd}}, own), milliseconds(2000)) << odd.dump();
  }
  EXPECT_EQ(BusyEvery(nlohmann::json::object(), own), milliseconds(2000));
}

// A row's or reference's op, batch and reps are the initiator's, untrusted: a
// batch the plan does not measure at the point (it would size the burst map past
// the pool), an unknown op or a rep count out of range is refused; a field of
// another type never throws.
TEST(TargetLoop, ARowsRequestIsReadAsUntrusted) {
  PlanPoint p;
  p.isl = 8192;
  p.batches = {1, 4};
  const nlohmann::json good = {{"op", "push"}, {"batch", 4}, {"epoch", 7}, {"reps", 3}};
  auto a = ReadAsked(good, p);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->push);
  EXPECT_EQ(a->batch, 4u);
  EXPECT_EQ(a->epoch, 7u);
  EXPECT_EQ(a->reps, 3);
  a = ReadAsked({{"op", "pull"}, {"batch", 1}}, p);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->push);
  EXPECT_EQ(a->epoch, 0u);
  EXPECT_EQ(a->reps, 1);
  for (const auto& [key, odd] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"batch", 2},
                                                           {"batch", uint64_t{1} << 40},
                                                           {"batch", -1},
                                                           {"batch", "4"},
                                                           {"batch", nullptr},
                                                           {"batch", 4.0},
                                                           {"op", "PUSH"},
                                                           {"op", 1},
                                                           {"op", nlohmann::json::array()},
                                                           {"reps", -1},
                                                           {"reps", (int64_t{1} << 30) + 1},
                                                           {"reps", "3"}}) {
    nlohmann::json bad = good;
    bad[key] = odd;
    const auto r = ReadAsked(bad, p);
    ASSERT_FALSE(r.ok()) << key << " " << odd.dump();
    EXPECT_EQ(r.status().code(), kvlane::Code::kInvalidArgument);
    if (odd.is_string())
      EXPECT_EQ(r.status().message().find(odd.get<std::string>()), std::string::npos)
          << "peer text in the error: " << r.status().message();
  }
  nlohmann::json no_batch = good;
  no_batch.erase("batch");
  EXPECT_FALSE(ReadAsked(no_batch, p).ok());
  EXPECT_FALSE(ReadAsked(nlohmann::json::array(), p).ok());
  nlohmann::json odd_epoch = good;
  odd_epoch["epoch"] = "7";
  EXPECT_EQ(ReadAsked(odd_epoch, p)->epoch, 0u);  // ignored: the verification then fails
}

}  // namespace
}  // namespace kvbench
