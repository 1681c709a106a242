// The control secret: the file it is read from, the proof, and the handshake in
// which each rank proves it before the other sends it anything more.
#include "control_secret.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <thread>

#include "hello.h"
#include "run_config.h"
#include "session.h"
#include "session_pair.h"

namespace kvbench {
namespace {

namespace fs = std::filesystem;
using testing::OpenBoth;
using testing::RankConfig;
using testing::RankZeroOn;

// A file of `bytes` in the test's temporary directory with `mode`; its path.
std::string SecretFile(const std::string& name, const std::string& bytes, mode_t mode = 0600) {
  const std::string path = ::testing::TempDir() + "/kvbench_secret_" + name;
  fs::remove(path);
  std::ofstream(path, std::ios::binary) << bytes;
  chmod(path.c_str(), mode);
  return path;
}

TEST(ControlSecret, TheFileIsTheOwnersAlone) {
  const std::string good(32, 's');
  auto read = ReadSecretFile(SecretFile("good", good));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read.value(), good);
  struct Bad {
    std::string path;
    std::string says;
  };
  for (const Bad& bad : {Bad{SecretFile("open", good, 0644), "chmod 600"},
                         Bad{SecretFile("group", good, 0620), "chmod 600"},
                         Bad{SecretFile("short", std::string(15, 's')), "16 to 4096 bytes"},
                         Bad{SecretFile("long", std::string(4097, 's')), "16 to 4096 bytes"},
                         Bad{::testing::TempDir(), "not a regular file"},
                         Bad{::testing::TempDir() + "/kvbench_secret_none", "No such file"}}) {
    auto r = ReadSecretFile(bad.path);
    ASSERT_FALSE(r.ok()) << bad.path;
    EXPECT_EQ(r.status().code(), kvlane::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(bad.says), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find(good), std::string::npos) << "the secret was quoted";
  }
  const std::string link = ::testing::TempDir() + "/kvbench_secret_link";
  fs::remove(link);
  fs::create_symlink(SecretFile("target", good), link);
  EXPECT_FALSE(ReadSecretFile(link).ok()) << "a symbolic link was followed";
}

TEST(ControlSecret, AProofIsBoundToTheSecretTheRankAndBothNonces) {
  const std::string secret(32, 'k'), n0 = NewNonce().value(), n1 = NewNonce().value();
  ASSERT_EQ(n0.size(), 64u);
  EXPECT_NE(n0, n1);
  const std::string p1 = ControlProof(secret, 1, n0, n1);
  EXPECT_EQ(p1.size(), 64u);
  EXPECT_TRUE(ProofMatches(secret, 1, n0, n1, p1));
  EXPECT_FALSE(ProofMatches(secret, 0, n0, n1, p1)) << "reflected as the other rank's";
  EXPECT_FALSE(ProofMatches(secret, 1, n1, n0, p1)) << "nonces swapped";
  EXPECT_FALSE(ProofMatches(secret, 1, n0, NewNonce().value(), p1)) << "another connection";
  EXPECT_FALSE(ProofMatches(std::string(32, 'K'), 1, n0, n1, p1)) << "another secret";
  EXPECT_FALSE(ProofMatches(secret, 1, n0, n1, p1.substr(0, 63)));
  EXPECT_FALSE(ProofMatches(secret, 1, n0, n1, p1 + "0"));
  EXPECT_FALSE(ProofMatches(secret, 1, n0, n1, ""));
  std::string bytes;
  EXPECT_TRUE(FromHex("00ff7a", &bytes));
  EXPECT_EQ(bytes, std::string("\x00\xff\x7a", 3));
  EXPECT_EQ(ToHex(bytes), "00ff7a");
  for (const char* bad : {"0", "0g", "FF", "0 ", "-1"}) EXPECT_FALSE(FromHex(bad, &bytes)) << bad;
}

// The MAC keys are one per direction and connection: bound to the secret, the
// sending rank and both nonces; a message's MAC to its key, its number and its bytes.
TEST(ControlSecret, MessageMacsAreBoundToTheKeyTheNumberAndTheBytes) {
  const std::string secret(32, 'k'), n0 = NewNonce().value(), n1 = NewNonce().value();
  const std::string hellos = R"({"rank":0})"
                             "\n"
                             R"({"rank":1})";
  const std::string k1 = ControlMacKey(secret, 1, n0, n1, hellos);
  ASSERT_EQ(k1.size(), 32u);
  EXPECT_EQ(k1, ControlMacKey(secret, 1, n0, n1, hellos));
  for (const std::string& other :
       {ControlMacKey(secret, 0, n0, n1, hellos), ControlMacKey(secret, 1, n1, n0, hellos),
        ControlMacKey(secret, 1, n0, NewNonce().value(), hellos),
        ControlMacKey(std::string(32, 'K'), 1, n0, n1, hellos),
        ControlMacKey(secret, 1, n0, n1,
                      R"({"rank":0})"
                      "\n"
                      R"({"rank":2})")}) {
    EXPECT_NE(other, k1);
  }
  const std::string body = R"({"type":"row","op":"push"})";
  const std::string mac = MessageMac(k1, 7, body);
  ASSERT_EQ(mac.size(), 32u);
  EXPECT_TRUE(MessageMacMatches(k1, 7, body, mac));
  EXPECT_FALSE(MessageMacMatches(k1, 6, body, mac)) << "another message's number";
  EXPECT_FALSE(MessageMacMatches(k1, 7 + (uint64_t{1} << 32), body, mac)) << "high bits count";
  EXPECT_FALSE(MessageMacMatches(ControlMacKey(secret, 0, n0, n1, hellos), 7, body, mac))
      << "reflected";
  EXPECT_FALSE(MessageMacMatches(k1, 7, R"({"type":"row","op":"pull"})", mac));
  EXPECT_FALSE(MessageMacMatches(k1, 7, body, mac.substr(0, 31)));
  EXPECT_FALSE(MessageMacMatches(k1, 7, body, ""));
}

TEST(ControlSecret, RanksWithTheSameSecretOpenTheRun) {
  const std::string file = SecretFile("shared", std::string(24, 'q'));
  auto pair = OpenBoth({"--transport", "tcp", "--secret-file", file},
                       {"--transport", "tcp", "--secret-file", file});
  ASSERT_TRUE(pair.target.ok()) << pair.target.status().ToString();
  ASSERT_TRUE(pair.initiator.ok()) << pair.initiator.status().ToString();
  EXPECT_EQ((*pair.initiator)->config().secret, std::string(24, 'q'));
}

// A rank 1 with another secret is dropped by rank 0, told why, and rank 0 goes on
// listening (until its control timeout here: no other rank 1 comes).
TEST(ControlSecret, ARankWithAnotherSecretIsDroppedAndToldWhy) {
  auto pair =
      OpenBoth({"--transport", "tcp", "--control-timeout", "3s", "--secret-file",
                SecretFile("mine", std::string(24, 'a'))},
               {"--transport", "tcp", "--secret-file", SecretFile("theirs", std::string(24, 'b'))});
  ASSERT_FALSE(pair.initiator.ok());
  EXPECT_NE(pair.initiator.status().message().find("did not prove the control secret"),
            std::string::npos)
      << pair.initiator.status().message();
  ASSERT_FALSE(pair.target.ok());
  EXPECT_EQ(pair.target.status().code(), kvlane::Code::kTimeout) << pair.target.status().ToString();
  EXPECT_NE(pair.target.status().message().find("1 connection(s) dropped"), std::string::npos)
      << pair.target.status().message();
}

// One rank with a secret and one without: each says what to pass.
TEST(ControlSecret, OneRankWithoutTheSecretIsToldToPassIt) {
  const std::string file = SecretFile("one", std::string(24, 'c'));
  auto pair = OpenBoth({"--transport", "tcp"}, {"--transport", "tcp", "--secret-file", file});
  ASSERT_FALSE(pair.target.ok());
  ASSERT_FALSE(pair.initiator.ok());
  EXPECT_NE(pair.target.status().message().find("this rank has none"), std::string::npos)
      << pair.target.status().message();
  EXPECT_NE(pair.initiator.status().message().find("pass the same --secret-file"),
            std::string::npos)
      << pair.initiator.status().message();
}

// A raw control client posing as rank 1: says its hello (nonce `nonce`, protocol
// `protocol`, auth "secret") to rank 0 at `peer` and takes rank 0's; `c` is null
// when it could not connect (a failure is recorded).
struct RawRankOne {
  std::unique_ptr<ControlChannel> c;
  std::string rank0_nonce;  // from rank 0's hello
  RawRankOne(const std::string& peer, const std::string& nonce, int64_t protocol) {
    auto connected = ControlChannel::Connect(peer, std::chrono::seconds(20));
    EXPECT_TRUE(connected.ok()) << connected.status().ToString();
    if (!connected.ok()) return;
    c = std::move(connected).value();
    EXPECT_TRUE(c->Send({{"type", "hello"},
                         {"protocol", protocol},
                         {"rank", 1},
                         {"role", "initiator"},
                         {"hostname", "h1"},
                         {"nonce", nonce},
                         {"auth", "secret"}})
                    .ok());
    auto hello = c->Expect("hello");
    EXPECT_TRUE(hello.ok()) << hello.status().ToString();
    if (hello.ok()) rank0_nonce = hello->value("nonce", "");
  }
  // The message types rank 0 sends from here until it closes.
  std::vector<std::string> Rest() {
    std::vector<std::string> got;
    for (auto m = c->Receive(); m.ok(); m = c->Receive()) got.push_back(m->value("type", "?"));
    return got;
  }
};

// Rank 0 over tcp with the control secret in `file`, opening on a thread of its
// own on `l`'s listener (handed over).
std::future<testing::SessionOrError> OpenTarget(testing::LoopbackListener& l,
                                                const std::string& file) {
  RunConfig c = RankZeroOn(l, {"--transport", "tcp", "--secret-file", file});
  return std::async(std::launch::async, [c] { return Session::Open(c); });
}

// A listener posing as rank 0 that claims a secret but cannot prove it: rank 1
// ends, and sends it nothing past its hello and its own proof (no path, plan or
// metadata: those name this host and, later, the engine's secret).
TEST(ControlSecret, AnImpostorRankZeroGetsNothingPastTheProof) {
  testing::LoopbackListener l = testing::ListenOnLoopback();
  ASSERT_TRUE(l.listener);
  const std::string peer = l.peer;
  auto impostor = std::async(std::launch::async, [&l] {
    std::vector<std::string> got;
    auto c = l.listener->Accept(std::chrono::seconds(20));
    if (!c.ok()) return got;
    (void)(*c)->Send({{"type", "hello"},
                      {"protocol", kControlProtocol},
                      {"rank", 0},
                      {"role", "target"},
                      {"nonce", std::string(64, 'a')},
                      {"auth", "secret"}});
    for (;;) {
      auto m = (*c)->Receive();
      if (!m.ok()) return got;
      got.push_back(m->value("type", "?"));
      if (got.back() == "proof") (void)(*c)->Send({{"type", "proof"}, {"proof", "00"}});
    }
  });
  auto opened = Session::Open(RankConfig(
      1, peer, {"--transport", "tcp", "--secret-file", SecretFile("real", std::string(24, 'r'))}));
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("rank 0 (" + peer + ") did not prove"),
            std::string::npos)
      << opened.status().message();
  EXPECT_EQ(impostor.get(), (std::vector<std::string>{"hello", "proof"}));
}

// A client posing as rank 1 without the secret is dropped before anything more
// than rank 0's hello reaches it, and the real rank 1 that connects next opens the
// run. Its hello claims another protocol: unproven, that must not end the run.
TEST(ControlSecret, AnImpostorRankOneIsDroppedAndTheRealOneOpensTheRun) {
  const std::string file = SecretFile("run", std::string(24, 'z'));
  testing::LoopbackListener l = testing::ListenOnLoopback();
  const std::string peer = l.peer;
  auto target = OpenTarget(l, file);
  {
    RawRankOne impostor(peer, std::string(64, 'b'), kControlProtocol + 1);
    ASSERT_TRUE(impostor.c);
    EXPECT_EQ(impostor.rank0_nonce.size(), 64u);
    ASSERT_TRUE(impostor.c->Send({{"type", "proof"}, {"proof", std::string(64, '0')}}).ok());
    EXPECT_EQ(impostor.Rest(), std::vector<std::string>{"error"});
  }
  auto initiator =
      Session::Open(RankConfig(1, peer, {"--transport", "tcp", "--secret-file", file}));
  auto t = target.get();
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(initiator.ok()) << initiator.status().ToString();
}

// A proof for rank 0's nonce on one connection, replayed on the next, is refused:
// rank 0 says a fresh nonce in each hello. (With one nonce for every connection, a
// proof seen on a connection that then died would be taken on the next.)
TEST(ControlSecret, AProofFromAnEarlierConnectionIsRefused) {
  const std::string secret(24, 'p'), file = SecretFile("replay", secret);
  testing::LoopbackListener l = testing::ListenOnLoopback();
  const std::string peer = l.peer;
  auto target = OpenTarget(l, file);
  const std::string n1(64, 'c');
  std::string seen_proof, first_nonce;
  {
    RawRankOne first(peer, n1, kControlProtocol);  // sees rank 0's hello, then dies
    ASSERT_TRUE(first.c);
    first_nonce = first.rank0_nonce;
    seen_proof = ControlProof(secret, 1, first.rank0_nonce, n1);
  }
  RawRankOne second(peer, n1, kControlProtocol);
  ASSERT_TRUE(second.c);
  EXPECT_NE(second.rank0_nonce, first_nonce);
  ASSERT_TRUE(second.c->Send({{"type", "proof"}, {"proof", seen_proof}}).ok());
  EXPECT_EQ(second.Rest(), std::vector<std::string>{"error"});
  auto initiator =
      Session::Open(RankConfig(1, peer, {"--transport", "tcp", "--secret-file", file}));
  auto t = target.get();
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(initiator.ok()) << initiator.status().ToString();
}

// A rank 1 that proves the secret but speaks another control protocol is a kvbench
// of another build: once proved, rank 0 reads its hello and ends, naming both builds.
TEST(ControlSecret, AProvedPeerOfAnotherProtocolIsRefusedNamingBothBuilds) {
  const std::string secret(24, 'v'), file = SecretFile("builds", secret);
  testing::LoopbackListener l = testing::ListenOnLoopback();
  const std::string peer = l.peer;
  auto target = OpenTarget(l, file);
  const std::string n1(64, 'd');
  RawRankOne other(peer, n1, kControlProtocol + 1);
  ASSERT_TRUE(other.c);
  ASSERT_TRUE(
      other.c->Send({{"type", "proof"}, {"proof", ControlProof(secret, 1, other.rank0_nonce, n1)}})
          .ok());
  auto proof = other.c->Expect("proof");
  ASSERT_TRUE(proof.ok()) << proof.status().ToString();
  EXPECT_TRUE(ProofMatches(secret, 0, other.rank0_nonce, n1, proof->value("proof", "")));
  auto t = target.get();
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("control protocol " + std::to_string(kControlProtocol + 1)),
            std::string::npos)
      << t.status().message();
}

// A spawned rank takes its launcher's secret from the environment, wipes and unsets
// it, and refuses to run without one or with a malformed one.
TEST(ControlSecret, ASpawnedRankTakesTheLaunchersSecretFromItsEnvironment) {
  RunConfig c;
  c.spawned = true;
  const std::string secret(20, '\x5a');
  setenv(kSpawnedSecretEnv, ToHex(secret).c_str(), 1);
  ASSERT_TRUE(c.ResolveSecret().ok());
  EXPECT_EQ(c.secret, secret);
  EXPECT_EQ(std::getenv(kSpawnedSecretEnv), nullptr);
  RunConfig none;
  none.spawned = true;
  EXPECT_EQ(none.ResolveSecret().code(), kvlane::Code::kInvalidArgument);
  for (const char* bad : {"zz", "00", "5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A"}) {
    RunConfig malformed;
    malformed.spawned = true;
    setenv(kSpawnedSecretEnv, bad, 1);
    EXPECT_EQ(malformed.ResolveSecret().code(), kvlane::Code::kInvalidArgument) << bad;
    EXPECT_TRUE(malformed.secret.empty()) << bad;
    EXPECT_EQ(std::getenv(kSpawnedSecretEnv), nullptr);
  }
}

// A spawned rank 0 takes the number of its inherited control listener from the
// environment and unsets it; rank 1, or a rank nobody spawned, only unsets it; a
// malformed number is refused.
TEST(ControlSecret, ASpawnedRankZeroTakesItsListenerFromItsEnvironment) {
  RunConfig zero;
  zero.spawned = true;
  zero.rank = 0;
  setenv(kSpawnedListenFdEnv, "7", 1);
  ASSERT_TRUE(zero.ResolveListener().ok());
  EXPECT_EQ(zero.listen_fd, 7);
  EXPECT_EQ(std::getenv(kSpawnedListenFdEnv), nullptr);
  for (const bool spawned : {true, false}) {
    RunConfig other;
    other.spawned = spawned;
    other.rank = spawned ? 1 : 0;
    setenv(kSpawnedListenFdEnv, "7", 1);
    ASSERT_TRUE(other.ResolveListener().ok());
    EXPECT_EQ(other.listen_fd, -1) << spawned;
    EXPECT_EQ(std::getenv(kSpawnedListenFdEnv), nullptr);
  }
  for (const char* bad : {"", "x", "7x", "2", "-5", "99999999999"}) {
    RunConfig malformed;
    malformed.spawned = true;
    malformed.rank = 0;
    setenv(kSpawnedListenFdEnv, bad, 1);
    EXPECT_EQ(malformed.ResolveListener().code(), kvlane::Code::kInvalidArgument) << bad;
    EXPECT_EQ(malformed.listen_fd, -1) << bad;
    EXPECT_EQ(std::getenv(kSpawnedListenFdEnv), nullptr);
  }
  RunConfig unset;
  EXPECT_TRUE(unset.ResolveListener().ok());
  EXPECT_EQ(unset.listen_fd, -1);
}

// Both ranks' opens, rank 1 reaching rank 0 through a relay that forwards every
// frame (and the 32 MAC bytes after each one past its sender's proof), and flips
// one bit of rank 0's frame number `flip` (0: its hello) at the first place
// `alter` finds in it; `flipped` says whether it did.
struct Relayed {
  testing::SessionOrError target, initiator;
  bool flipped = false;
};
Relayed OpenThroughARelay(const std::string& file, int flip,
                          const std::function<size_t(const std::string&)>& alter) {
  testing::LoopbackListener to_target = testing::ListenOnLoopback();
  testing::LoopbackListener relay = testing::ListenOnLoopback();
  EXPECT_TRUE(to_target.listener && relay.listener);
  auto target = OpenTarget(to_target, file);
  std::atomic<bool> flipped{false};
  auto pump = [&](ControlChannel* from, ControlChannel* to, bool from_rank0) {
    bool sealed = false;
    for (int frame = 0;; ++frame) {
      uint32_t len = 0;
      if (!from->ReceiveRaw(&len, sizeof(len)).ok()) break;
      std::string body(ntohl(len) + (sealed ? 32 : 0), '\0');
      if (!from->ReceiveRaw(body.data(), body.size()).ok()) break;
      if (from_rank0 && frame == flip) {
        const size_t at = alter(body);
        if (at < body.size()) {
          body[at] ^= 1;
          flipped = true;
        }
      }
      sealed = sealed || body.find(R"("type":"proof")") != std::string::npos;
      if (!to->SendRaw(&len, sizeof(len)).ok() || !to->SendRaw(body.data(), body.size()).ok())
        break;
    }
    from->Abort();
    to->Abort();
  };
  auto relaying = std::async(std::launch::async, [&] {
    auto from_initiator = relay.listener->Accept(std::chrono::seconds(20));
    auto to_rank0 = ControlChannel::Connect(to_target.peer, std::chrono::seconds(20));
    if (!from_initiator.ok() || !to_rank0.ok()) return;
    std::thread back(pump, to_rank0->get(), from_initiator->get(), true);
    pump(from_initiator->get(), to_rank0->get(), false);
    back.join();
  });
  testing::SessionOrError initiator = Session::Open(RankConfig(
      1, relay.peer, {"--transport", "tcp", "--control-timeout", "20s", "--secret-file", file}));
  testing::SessionOrError rank0 = target.get();
  relaying.get();
  return {std::move(rank0), std::move(initiator), flipped.load()};
}

// A bit of the first message rank 0 sends after the proofs flipped on the way
// (frames: hello, proof, then sealed ones): rank 1 refuses it for its MAC, and the
// open ends on both ranks. Without the MAC it would be read as sent.
TEST(ControlSecret, AMessageAlteredOnThePathAfterTheProofsEndsTheRun) {
  const std::string file = SecretFile("relayed", std::string(24, 'm'));
  Relayed r = OpenThroughARelay(file, 2, [](const std::string& b) { return b.size() / 4; });
  EXPECT_TRUE(r.flipped);
  ASSERT_FALSE(r.initiator.ok());
  EXPECT_NE(r.initiator.status().message().find("failed its MAC"), std::string::npos)
      << r.initiator.status().ToString();
  EXPECT_FALSE(r.target.ok());
}

// Rank 0's hello altered on the way (a bit of its host name, still valid JSON),
// which the proofs do not cover: the ranks derive different MAC keys from the
// hellos they saw, so the first sealed message fails its MAC and the open ends.
TEST(ControlSecret, AHelloAlteredOnThePathEndsTheRun) {
  const std::string file = SecretFile("relayed_hello", std::string(24, 'h'));
  Relayed r = OpenThroughARelay(file, 0, [](const std::string& b) {
    const size_t at = b.find(R"("hostname":")");
    return at == std::string::npos ? b.size() : at + 12;  // the name's first byte
  });
  EXPECT_TRUE(r.flipped);
  ASSERT_FALSE(r.initiator.ok());
  ASSERT_FALSE(r.target.ok());
  const std::string both = r.initiator.status().message() + " | " + r.target.status().message();
  EXPECT_NE(both.find("failed its MAC"), std::string::npos) << both;
}

// Ranks with a secret seal their control channel; ranks without one do not.
TEST(ControlSecret, OnlyRanksWithASecretSealTheirChannel) {
  const std::string file = SecretFile("sealed", std::string(24, 's'));
  auto with = OpenBoth({"--transport", "tcp", "--secret-file", file},
                       {"--transport", "tcp", "--secret-file", file});
  ASSERT_TRUE(with.target.ok() && with.initiator.ok());
  EXPECT_TRUE((*with.target)->control().sealed());
  EXPECT_TRUE((*with.initiator)->control().sealed());
  auto without = OpenBoth({"--transport", "tcp"}, {"--transport", "tcp"});
  ASSERT_TRUE(without.target.ok() && without.initiator.ok());
  EXPECT_FALSE((*without.target)->control().sealed());
  EXPECT_FALSE((*without.initiator)->control().sealed());
}

}  // namespace
}  // namespace kvbench
