// A network cut between two network namespaces joined by a veth pair that the
// test creates: requests end with an error within their deadline (io_timeout),
// and after the link comes back a new connection works. The target runs as a
// real process (netcut_target) in namespace B; this process joins namespace A
// for the initiator. Needs root and iproute2; skipped, with the reason, only
// where namespaces cannot be created.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/metadata.h"
#include "test_util.h"

extern char** environ;

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Runs a shell command; returns its exit code and (in *out) stdout+stderr.
int Sh(const std::string& cmd, std::string* out = nullptr) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return -1;
  std::string text;
  char buf[256];
  while (fgets(buf, sizeof(buf), f) != nullptr) text += buf;
  int rc = pclose(f);
  if (out != nullptr) *out = text;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Two namespaces, A (10.213.x.1) and B (10.213.x.2), joined by veth vA <-> vB.
class NetnsPair {
 public:
  // Empty on success, else why namespaces are impossible here.
  std::string Create() {
    if (geteuid() != 0) return "needs root (CAP_SYS_ADMIN + CAP_NET_ADMIN) to create network namespaces";
    if (Sh("command -v ip") != 0) return "iproute2 ('ip') is not installed";
    const std::string id = std::to_string(getpid() % 100000);
    a_ = "kvlA" + id, b_ = "kvlB" + id, va_ = "kva" + id, vb_ = "kvb" + id;
    const std::string net = "10.213." + std::to_string(getpid() % 250);
    ip_a_ = net + ".1", ip_b_ = net + ".2";
    std::string out;
    if (Sh("ip netns add " + a_, &out) != 0) return "cannot create a network namespace: " + out;
    created_ = true;
    const std::string cmds[] = {
        "ip netns add " + b_,
        "ip link add " + va_ + " type veth peer name " + vb_,
        "ip link set " + va_ + " netns " + a_,
        "ip link set " + vb_ + " netns " + b_,
        "ip -n " + a_ + " addr add " + ip_a_ + "/24 dev " + va_,
        "ip -n " + b_ + " addr add " + ip_b_ + "/24 dev " + vb_,
        "ip -n " + a_ + " link set lo up",
        "ip -n " + b_ + " link set lo up",
        "ip -n " + a_ + " link set " + va_ + " up",
        "ip -n " + b_ + " link set " + vb_ + " up",
    };
    for (const std::string& c : cmds)
      if (Sh(c, &out) != 0) return "'" + c + "' failed: " + out;
    return "";
  }
  ~NetnsPair() {
    if (!created_) return;
    (void)Sh("ip netns del " + a_);
    (void)Sh("ip netns del " + b_);  // takes the veth pair with it
  }
  bool SetLinkB(bool up) { return Sh("ip -n " + b_ + " link set " + vb_ + (up ? " up" : " down")) == 0; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  const std::string& ip_a() const { return ip_a_; }
  const std::string& ip_b() const { return ip_b_; }

 private:
  bool created_ = false;
  std::string a_, b_, va_, vb_, ip_a_, ip_b_;
};

// This thread (and the threads it starts afterwards) in namespace `name`;
// restores the original namespace on destruction.
class JoinNetns {
 public:
  explicit JoinNetns(const std::string& name) {
    orig_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    ok_ = orig_ >= 0 && fd >= 0 && setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) close(fd);
  }
  ~JoinNetns() {
    if (orig_ >= 0) {
      (void)setns(orig_, CLONE_NEWNET);
      close(orig_);
    }
  }
  bool ok() const { return ok_; }

 private:
  int orig_ = -1;
  bool ok_ = false;
};

// The target process, in namespace B.
class TargetProcess {
 public:
  bool Start(const NetnsPair& ns) {
    dir_ = fs::temp_directory_path() / ("kvlane-netcut-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::vector<std::string> args = {"ip", "netns", "exec", ns.b(), KVLANE_NETCUT_TARGET, ns.ip_b(), dir_.string()};
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "ip", nullptr, nullptr, argv.data(), environ) != 0) return false;
    for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < 20s;) {
      if (fs::exists(dir_ / "meta")) {
        std::ifstream f(dir_ / "meta", std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        meta_ = ss.str();
        return true;
      }
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return (pid_ = -1, false);
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  ~TargetProcess() {
    if (pid_ > 0) {
      std::ofstream(dir_ / "stop").put('x');
      int st = 0;
      for (int i = 0; i < 250 && waitpid(pid_, &st, WNOHANG) == 0; ++i) std::this_thread::sleep_for(20ms);
      if (waitpid(pid_, &st, WNOHANG) == 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &st, 0);
      }
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  const std::string& meta() const { return meta_; }

 private:
  pid_t pid_ = -1;
  fs::path dir_;
  std::string meta_;
};

// READs the target's 4 MiB pattern buffer; returns the status and how long it took.
Status ReadAll(Agent& a, uint8_t* dst, uint64_t remote_base, std::chrono::milliseconds* took) {
  constexpr uint64_t kLen = 4 << 20;
  DescList l, r;
  l.Add(dst, kLen);
  r.Add(remote_base, kLen);
  auto t0 = std::chrono::steady_clock::now();
  KVLANE_ASSIGN_OR_RETURN(PreparedId pl, a.PrepareLocal(l));
  KVLANE_ASSIGN_OR_RETURN(PreparedId pr, a.PrepareRemote("target", r));
  auto h = a.MakeTransfer(Op::kRead, pl, {}, pr, {});
  Status s = h.status();
  if (h.ok()) {
    XferHandle x = h.value();
    s = a.Post(&x);
    if (!s.is_error()) s = a.Wait(x, 30s);
    (void)a.Release(&x);
  }
  (void)a.ReleasePrepared(pl);
  (void)a.ReleasePrepared(pr);
  *took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  return s;
}

// Where the target's one registered region lives (from its metadata).
uint64_t DecodeFirstBase(const std::string& blob) {
  auto m = core::DecodeMeta(blob);
  return m.ok() && !m->pieces.empty() ? m->pieces[0].base : 0;
}

TEST(NetCut, RequestsFailWithinDeadlineAndNewConnectionWorksAfterLinkReturns) {
  NetnsPair ns;
  std::string why = ns.Create();
  if (!why.empty()) GTEST_SKIP() << "network namespaces impossible here: " << why;
  TargetProcess target;
  ASSERT_TRUE(target.Start(ns)) << "netcut_target did not start in namespace " << ns.b();

  JoinNetns in_a(ns.a());
  ASSERT_TRUE(in_a.ok()) << "setns into " << ns.a() << " failed";
  AgentOptions o = OptionsFor("initiator", "tcp");
  o.tcp_listen_host = ns.ip_a();
  o.io_timeout = 1500ms;  // the request deadline: a lane with work and no progress fails
  o.connect_timeout = 1000ms;
  auto a_or = Agent::Create(o);
  ASSERT_TRUE(a_or.ok()) << a_or.status().ToString();
  Agent& a = *a_or.value();
  std::vector<uint8_t> dst(4 << 20);
  ASSERT_TRUE(a.RegisterMemory(dst.data(), dst.size()).ok());
  ASSERT_TRUE(a.LoadPeer(target.meta()).ok());
  const uint64_t base = DecodeFirstBase(target.meta());
  std::chrono::milliseconds took{};

  Status s = ReadAll(a, dst.data(), base, &took);
  ASSERT_TRUE(s.ok()) << "before the cut: " << s.ToString();
  EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 77), -1);

  ASSERT_TRUE(ns.SetLinkB(false));
  std::fill(dst.begin(), dst.end(), 0);
  s = ReadAll(a, dst.data(), base, &took);
  EXPECT_TRUE(s.is_error()) << s.ToString();
  EXPECT_TRUE(s.code() == Code::kTimeout || s.code() == Code::kRemoteDisconnect) << s.ToString();
  EXPECT_LE(took, o.io_timeout + 1500ms) << "the request outlived its deadline";
  EXPECT_TRUE(a.PeerError("target").is_error());
  // A fresh connection while the link is down fails within connect_timeout.
  ASSERT_TRUE(a.RemovePeer("target").ok());
  ASSERT_TRUE(a.LoadPeer(target.meta()).ok());
  s = ReadAll(a, dst.data(), base, &took);
  EXPECT_TRUE(s.is_error());
  EXPECT_LE(took, o.connect_timeout + 1500ms);
  std::printf("[ info ] during the cut: %s after %lld ms\n", s.ToString().c_str(),
              static_cast<long long>(took.count()));

  ASSERT_TRUE(ns.SetLinkB(true));
  // The link needs a moment to carry traffic again; a new connection then works.
  for (int attempt = 0; attempt < 20; ++attempt) {
    ASSERT_TRUE(a.RemovePeer("target").ok());
    ASSERT_TRUE(a.LoadPeer(target.meta()).ok());
    s = ReadAll(a, dst.data(), base, &took);
    if (s.ok()) break;
    std::this_thread::sleep_for(250ms);
  }
  ASSERT_TRUE(s.ok()) << "after the link came back: " << s.ToString();
  EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 77), -1);
}

}  // namespace
}  // namespace kvlane::test
