// kvlane_test_peer: the other process of multiprocess_test. It owns one agent
// ("child") and one registered buffer, and answers line commands on stdin with
// one line on stdout:
//   meta               -> hex of ExportMetadata()
//   port               -> the metadata listener's port
//   addr               -> buffer address (decimal)
//   load HEX           -> LoadPeer(blob) -> "ok NAME" | "err CODE"
//   fill SEED          -> pattern into the buffer
//   sentinel BYTE      -> memset the buffer
//   verify SEED OFF LEN [BASE] -> "ok" | "mismatch I"
//   waitnotif HEX SEED LEN -> waits (10 s) for notification HEX, then verifies
//                         [0, LEN) against SEED at that moment: "ok" | "mismatch I" | "timeout"
//   notify PEER HEX    -> SendNotification -> "ok" | "err CODE"
//   stall / unstall    -> hold / drop the registry lock (remote accesses wait)
//   quit
// Usage: kvlane_test_peer TRANSPORT BYTES [METADATA_LISTEN]
// KVLANE_TEST_PEER_UID=N (as root): runs as user and group N.
// KVLANE_TEST_PEER_NO_PTRACE=1: drops CAP_SYS_PTRACE first (a root peer then
// may not copy the memory of a root process that holds it).
#include <grp.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

std::string WaitNotif(Agent& agent, const std::string& want, uint64_t seed, uint64_t len,
                      const uint8_t* buf) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& n : agent.TakeNotifications()) {
      if (n.bytes != want) continue;
      int64_t bad = FirstMismatch(buf, len, seed);  // the data must be here already
      return bad < 0 ? "ok" : "mismatch " + std::to_string(bad);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return "timeout";
}

int Main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (const char* uid = std::getenv("KVLANE_TEST_PEER_UID"); uid != nullptr) {
    const auto id = static_cast<uid_t>(std::strtoul(uid, nullptr, 10));
    if (setgroups(0, nullptr) != 0 || setgid(id) != 0 || setuid(id) != 0) return 5;
  }
  if (std::getenv("KVLANE_TEST_PEER_NO_PTRACE") != nullptr) {
    __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2] = {};
    if (syscall(SYS_capget, &head, caps) != 0) return 5;
    const unsigned bit = 1u << (CAP_SYS_PTRACE % 32);
    caps[CAP_SYS_PTRACE / 32].effective &= ~bit;
    caps[CAP_SYS_PTRACE / 32].permitted &= ~bit;
    caps[CAP_SYS_PTRACE / 32].inheritable &= ~bit;
    if (syscall(SYS_capset, &head, caps) != 0) return 5;
  }
  AgentOptions o = OptionsFor("child", argv[1]);
  if (argc > 3) o.metadata_listen = argv[3];
  auto agent = Agent::Create(o);
  if (!agent.ok()) {
    std::cerr << agent.status().ToString() << "\n";
    return 3;
  }
  Agent& a = *agent.value();
  std::vector<uint8_t> buf(std::strtoull(argv[2], nullptr, 10), 0);
  if (!a.RegisterMemory(buf.data(), buf.size()).ok()) return 4;
  std::unique_ptr<RemoteStall> stall;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd, reply = "ok";
    in >> cmd;
    if (cmd == "meta") {
      reply = ToHex(a.ExportMetadata().value());
    } else if (cmd == "port") {
      reply = std::to_string(a.metadata_port());
    } else if (cmd == "addr") {
      reply = std::to_string(reinterpret_cast<uint64_t>(buf.data()));
    } else if (cmd == "load") {
      std::string h;
      in >> h;
      auto r = a.LoadPeer(FromHex(h));
      reply = r.ok() ? "ok " + r.value() : "err " + std::string(CodeName(r.status().code()));
    } else if (cmd == "fill") {
      uint64_t seed;
      in >> seed;
      Fill(buf, seed);
    } else if (cmd == "sentinel") {
      int v;
      in >> v;
      std::fill(buf.begin(), buf.end(), static_cast<uint8_t>(v));
    } else if (cmd == "verify") {
      uint64_t seed, off, len, base = 0;
      in >> seed >> off >> len;
      if (!(in >> base)) base = off;
      int64_t bad = FirstMismatch(buf.data() + off, len, seed, base);
      if (bad >= 0) reply = "mismatch " + std::to_string(bad);
    } else if (cmd == "waitnotif") {
      std::string h;
      uint64_t seed, len;
      in >> h >> seed >> len;
      reply = WaitNotif(a, FromHex(h), seed, len, buf.data());
    } else if (cmd == "notify") {
      std::string peer, h;
      in >> peer >> h;
      Status s = a.SendNotification(peer, FromHex(h));
      if (!s.ok()) reply = "err " + std::string(CodeName(s.code()));
    } else if (cmd == "stall") {
      stall = std::make_unique<RemoteStall>(a);
    } else if (cmd == "unstall") {
      stall.reset();
    } else if (cmd == "quit") {
      std::cout << "ok" << std::endl;
      break;
    } else {
      reply = "err unknown-command";
    }
    std::cout << reply << std::endl;
  }
  // The agent before `buf`: its server threads may still be in a call that
  // reads the buffer (a reply the initiator already has).
  stall.reset();
  agent.value().reset();
  return 0;
}

}  // namespace
}  // namespace kvlane::test

int main(int argc, char** argv) { return kvlane::test::Main(argc, argv); }
