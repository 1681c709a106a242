// kvlane_stream_bench: tcp and shm throughput of kvlane between two processes
// (this one, the initiator, and a forked target), each beside a plain
// reference measured in the same run between the same two processes:
//   tcp 2 MiB WRITE / READ  vs  a blocking send/recv loop moving the same bytes
//   tcp 4 KiB, 64 outstanding  vs  the same loop, 4 KiB requests, 24 B replies
//   shm 2 MiB WRITE / READ  vs  a single-thread memcpy of the same bytes
//   tcp 4 KiB WRITE / READ one at a time, lanes idle between posts: p50 and
//   p99 of post-to-Check, the post sent by the posting thread (the default,
//   AgentOptions::post_inline_bytes) and by the lane's thread (0), each vs a
//   blocking 4 KiB / 24 B echo; shm: the posting thread's vs the lane's
// Trials alternate kvlane and reference; the table shows medians.
//   tcp 4 KiB WRITE / READ one at a time beside a continuous 2 MiB WRITE stream
//   on another agent's lanes  vs  the echo beside a blocking 2 MiB send loop on
//   another connection (each served by a thread of its own); shm: vs the same
//   kvlane posts alone. Each also gives the stream's GB/s meanwhile.
// Usage: kvlane_stream_bench [--trials N] [--bulk-mib N] [--window N] [--lanes N]
//                            [--small-count N] [--latency-count N] [--gap-us N]
//                            [--beside-count N] [--spin-us N] [--json FILE]
// --latency-count 0 skips the latency rows, --beside-count 0 the beside rows;
// --bulk-mib 0 the throughput rows. --spin-us sets AgentOptions::spin of every
// agent, the target's too (default: the engine's).
#include "stream_bench.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kvlane/kvlane.h"

namespace kvlane::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  int trials = 5;
  uint64_t bulk_bytes = 512ull << 20;  // per trial
  int window = 8;                      // 2 MiB requests in flight
  int lanes = 2;
  uint64_t small_count = 50000;
  int small_window = 64;
  uint64_t latency_count = 2000;  // per trial and case
  uint64_t beside_count = 2000;   // per trial and case, beside a 2 MiB stream
  int gap_us = 200;               // between latency posts: more than AgentOptions::spin
  int spin_us = -1;               // AgentOptions::spin of every agent; < 0: the default
  std::string json;
};

struct Row {
  std::string name, unit, target;
  double kv = 0, ref = 0;
  double ratio() const { return ref > 0 ? kv / ref : 0; }
};

// Also called on the "beside" rows' bulk thread: _exit, so that no exit-time
// destructor runs under threads still using the agents.
[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "kvlane_stream_bench: %s\n", what.c_str());
  std::fflush(nullptr);
  _exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

constexpr uint32_t kBulk = 2 << 20, kSmall = 4096;  // the bulk and the small transfer

// One prepared transfer of `msg` bytes between `local` and the target's `remote`.
XferHandle MakeOne(Agent& a, Op op, uint8_t* local, uint64_t remote, uint32_t msg) {
  DescList l, r;
  l.Add(local, msg);
  r.Add(remote, msg);
  auto lp = a.PrepareLocal(l);
  auto rp = a.PrepareRemote("target", r);
  if (!lp.ok() || !rp.ok()) Die("prepare: " + (lp.ok() ? rp.status() : lp.status()).ToString());
  auto h = a.MakeTransfer(op, lp.value(), {}, rp.value(), {});
  if (!h.ok()) Die("make transfer: " + h.status().ToString());
  return h.value();
}

// Posts `h` and spins on Check until it is done: microseconds from before Post.
double PostAndSpin(Agent& a, XferHandle& h) {
  auto t0 = Clock::now();
  Status s = a.Post(&h);
  while (s.in_progress()) s = a.Check(h);
  if (!s.ok()) Die("transfer: " + s.ToString());
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// `window` prepared handles, handle k moving slice k of `msg` bytes.
class KvCase {
 public:
  KvCase(Agent& a, Op op, uint32_t msg, int window, uint8_t* local, uint64_t remote) : a_(a) {
    for (int k = 0; k < window; ++k) {
      const uint64_t off = static_cast<uint64_t>(k) * msg;
      hs_.push_back(MakeOne(a, op, local + off, remote + off, msg));
    }
  }
  // Posts until `stop` is set, keeping the window full; returns bytes per second.
  double RunUntil(const std::atomic<bool>& stop, uint32_t msg) {
    auto t0 = Clock::now();
    uint64_t i = 0;
    for (; !stop.load(std::memory_order_relaxed); ++i) {
      XferHandle& h = hs_[i % hs_.size()];
      if (i >= hs_.size()) WaitOk(h);
      Status s = a_.Post(&h);
      if (s.is_error()) Die("post: " + s.ToString());
    }
    for (uint64_t k = 0; k < std::min<uint64_t>(i, hs_.size()); ++k) WaitOk(hs_[k]);
    return static_cast<double>(i) * msg / std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // Posts `count` requests keeping the window full; returns seconds.
  double Run(uint64_t count) {
    auto t0 = Clock::now();
    for (uint64_t i = 0; i < count; ++i) {
      XferHandle& h = hs_[i % hs_.size()];
      if (i >= hs_.size()) WaitOk(h);
      Status s = a_.Post(&h);
      if (s.is_error()) Die("post: " + s.ToString());
    }
    for (uint64_t i = 0; i < std::min<uint64_t>(count, hs_.size()); ++i) WaitOk(hs_[i]);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

 private:
  void WaitOk(const XferHandle& h) {
    Status s = a_.Wait(h, std::chrono::seconds(60));
    if (!s.ok()) Die("transfer: " + s.ToString());
  }
  Agent& a_;
  std::vector<XferHandle> hs_;
};

struct Target {
  pid_t pid;
  int to_child;
  std::string blob;
  uint16_t ref_port;
  uint64_t addr;
};

Target ForkTarget(uint64_t bytes, int spin_us) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) Die("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    _exit(RunTarget(down[0], up[1], bytes, spin_us));
  }
  close(down[0]);
  close(up[1]);
  Target t{pid, down[1], {}, 0, 0};
  auto get = [&](void* p, size_t n) {
    for (size_t off = 0; off < n;) {
      ssize_t k = read(up[0], static_cast<char*>(p) + off, n - off);
      if (k <= 0) Die("target process failed to start");
      off += k;
    }
  };
  uint32_t n = 0;
  get(&n, 4);
  t.blob.resize(n);
  get(t.blob.data(), n);
  get(&t.ref_port, 2);
  get(&t.addr, 8);
  close(up[0]);
  return t;
}

// `inline_bytes` < 0: the engine's default AgentOptions::post_inline_bytes.
// `stripe_min_bytes` 0: the engine's default.
std::unique_ptr<Agent> MakeInitiator(const std::string& transport, const Config& c, const Target& t,
                                     int64_t inline_bytes = -1, const std::string& suffix = "",
                                     uint64_t stripe_min_bytes = 0) {
  AgentOptions o;
  o.name = "init-" + transport +
           (inline_bytes >= 0 ? "-inline" + std::to_string(inline_bytes) : "") + suffix;
  if (inline_bytes >= 0) o.post_inline_bytes = static_cast<uint64_t>(inline_bytes);
  o.transports = {transport};
  o.lanes_per_peer = c.lanes;
  if (stripe_min_bytes != 0) o.stripe_min_bytes = stripe_min_bytes;
  if (c.spin_us >= 0) o.spin = std::chrono::microseconds(c.spin_us);
  auto a = Agent::Create(o);
  if (!a.ok()) Die(a.status().ToString());
  auto peer = a.value()->LoadPeer(t.blob);
  if (!peer.ok()) Die(peer.status().ToString());
  auto tr = a.value()->PeerTransport("target");
  if (!tr.ok() || tr.value() != transport) Die("transport " + transport + " not reachable");
  return std::move(a).value();
}

void PrintHeader(const Config& c, const AgentOptions& d) {
  utsname u{};
  uname(&u);
  char date[64];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  std::printf("kvlane_stream_bench  %s\n", VersionString().c_str());
  std::printf("date      %s\n", date);
  std::printf("machine   nproc=%ld  cpu=%s  kernel=%s %s\n", sysconf(_SC_NPROCESSORS_ONLN),
              CpuModel().c_str(), u.sysname, u.release);
  std::printf(
      "config    trials=%d (median; 1 warm-up)  bulk=%llu MiB/trial in 2 MiB requests, "
      "window=%d  lanes_per_peer=%d  chunk_bytes=%llu  stripe_min_bytes=%llu  spin=%lld us\n",
      c.trials, static_cast<unsigned long long>(c.bulk_bytes >> 20), c.window, c.lanes,
      static_cast<unsigned long long>(d.chunk_bytes),
      static_cast<unsigned long long>(d.stripe_min_bytes),
      static_cast<long long>(c.spin_us >= 0 ? c.spin_us : d.spin.count()));
  std::printf(
      "          small: %llu x 4 KiB WRITE per trial, %d outstanding; "
      "references: one blocking TCP connection (TCP_NODELAY), one thread per side; "
      "memcpy: one thread\n",
      static_cast<unsigned long long>(c.small_count), c.small_window);
  std::printf(
      "          latency: %llu posts per trial and case, one at a time, %d us apart (lane "
      "threads asleep); reference: a blocking 4 KiB / 24 B echo, same gap\n",
      static_cast<unsigned long long>(c.latency_count), c.gap_us);
  std::printf(
      "          beside: %llu such posts per trial and case, while another agent streams 2 MiB "
      "WRITEs (window %d); reference: the echo beside a blocking 2 MiB send loop\n\n",
      static_cast<unsigned long long>(c.beside_count), c.window);
}

void PrintTable(const std::vector<Row>& rows) {
  std::printf("%-34s %12s %12s %8s %8s  %s\n", "case", "kvlane", "reference", "ratio", "target", "unit");
  for (const Row& r : rows) {
    bool miss = !r.target.empty() && r.ratio() * 100 < std::stod(r.target);
    std::printf("%-34s %12.2f %12.2f %7.1f%% %8s  %s%s\n", r.name.c_str(), r.kv, r.ref, r.ratio() * 100,
                r.target.empty() ? "-" : (">=" + r.target + "%").c_str(), r.unit.c_str(),
                miss ? "  MISSED" : "");
  }
}

void WriteJson(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream f(path);
  f << "{\"version\": 1, \"tool\": \"kvlane_stream_bench\", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << (i ? ", " : "") << "{\"case\": \"" << r.name << "\", \"unit\": \"" << r.unit
      << "\", \"kvlane\": " << r.kv << ", \"reference\": " << r.ref << ", \"ratio\": " << r.ratio()
      << ", \"target_pct\": " << (r.target.empty() ? "null" : r.target) << "}";
  }
  f << "]}\n";
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// One prepared `msg`-byte transfer posted `count` times, one at a time,
// `gap_us` apart; each post's microseconds from before Post to the Check that
// saw it done (spinning).
std::vector<double> KvLatency(Agent& a, Op op, uint32_t msg, uint8_t* local, uint64_t remote,
                              uint64_t count, int gap_us) {
  XferHandle h = MakeOne(a, op, local, remote, msg);
  std::vector<double> us;
  for (uint64_t i = 0; i < count; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    us.push_back(PostAndSpin(a, h));
  }
  (void)a.Release(&h);
  return us;
}

// As KvLatency, but each post follows a `bulk`-byte WRITE posted on agent `b`
// (the lanebench mixed shape); the next round starts once the bulk is done and
// `gap_us` passed.
// `fresh`: the bulk's source is rewritten before each post (as lanebench
// stages a new payload), outside the timed part.
std::vector<double> KvAfterBulk(Agent& a, Op op, uint8_t* local, uint64_t remote, Agent& b,
                                uint8_t* bulk_local, uint64_t bulk_remote, const Config& c,
                                bool fresh = false) {
  XferHandle bh = MakeOne(b, Op::kWrite, bulk_local, bulk_remote, kBulk);
  XferHandle h = MakeOne(a, op, local, remote, kSmall);
  std::vector<double> us;
  for (uint64_t i = 0; i < c.beside_count; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(c.gap_us));
    if (fresh) std::memset(bulk_local, static_cast<int>(i & 0xff), kBulk);
    Status bs = b.Post(&bh);
    if (bs.is_error()) Die("bulk post: " + bs.ToString());
    us.push_back(PostAndSpin(a, h));
    bs = b.Wait(bh, std::chrono::seconds(60));
    if (!bs.ok()) Die("bulk: " + bs.ToString());
  }
  (void)a.Release(&h);
  (void)b.Release(&bh);
  return us;
}

// Latency rows (lower is better): trials alternate kvlane and the reference;
// each cell is the median over trials of that trial's p50 (or p99).
void MeasureLatency(std::vector<Row>& rows, const std::string& name, const Config& c,
                    const std::function<std::vector<double>()>& kv,
                    const std::function<std::vector<double>()>& ref) {
  std::vector<double> k50, k99, r50, r99;
  for (int t = 0; t < c.trials; ++t) {
    auto k = kv();
    auto r = ref();
    k50.push_back(Percentile(k, 0.5)), k99.push_back(Percentile(k, 0.99));
    r50.push_back(Percentile(r, 0.5)), r99.push_back(Percentile(r, 0.99));
  }
  rows.push_back({name + " p50", "us", "", Median(k50), Median(r50)});
  rows.push_back({name + " p99", "us", "", Median(k99), Median(r99)});
}

// Runs `small` while `bulk` streams on a thread of its own (started first, and
// given `lead` to reach its steady state); `*bulk_rate` gets the bulk's bytes
// per second over the whole time.
std::vector<double> Beside(const std::function<double(const std::atomic<bool>&)>& bulk,
                           const std::function<std::vector<double>()>& small, double* bulk_rate) {
  constexpr auto lead = std::chrono::milliseconds(20);
  std::atomic<bool> stop{false};
  std::thread t([&] { *bulk_rate = bulk(stop); });
  std::this_thread::sleep_for(lead);
  std::vector<double> us = small();
  stop.store(true);
  t.join();
  return us;
}

// The "beside" rows: a small transfer's latency while a 2 MiB stream runs on
// another agent's lanes (kvlane) or another connection (reference), trials
// alternating; p50 and p99 as in MeasureLatency, and the bulk's GB/s.
void MeasureBeside(std::vector<Row>& rows, const std::string& name, const Config& c,
                   const std::function<double(const std::atomic<bool>&)>& kv_bulk,
                   const std::function<std::vector<double>()>& kv_small,
                   const std::function<double(const std::atomic<bool>&)>& ref_bulk,
                   const std::function<std::vector<double>()>& ref_small) {
  std::vector<double> k50, k99, r50, r99, kb, rb;
  for (int t = 0; t < c.trials; ++t) {
    double kr = 0, rr = 0;
    auto k = Beside(kv_bulk, kv_small, &kr);
    auto r = ref_bulk ? Beside(ref_bulk, ref_small, &rr) : ref_small();
    k50.push_back(Percentile(k, 0.5)), k99.push_back(Percentile(k, 0.99));
    r50.push_back(Percentile(r, 0.5)), r99.push_back(Percentile(r, 0.99));
    kb.push_back(kr / 1e9), rb.push_back(rr / 1e9);
  }
  rows.push_back({name + " p50", "us", "", Median(k50), Median(r50)});
  rows.push_back({name + " p99", "us", "", Median(k99), Median(r99)});
  rows.push_back({name + ": bulk", "GB/s", "", Median(kb), ref_bulk ? Median(rb) : 0});
}

// Alternates kvlane and reference trials; returns medians of `scale / seconds`.
template <typename K, typename R>
Row Measure(Row row, const Config& c, double scale, K kv, R ref) {
  kv(), ref();  // warm-up
  std::vector<double> k, r;
  for (int t = 0; t < c.trials; ++t) {
    k.push_back(scale / kv());
    r.push_back(scale / ref());
  }
  row.kv = Median(k);
  row.ref = Median(r);
  return row;
}

int Main(int argc, char** argv) {
  Config c;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--trials") c.trials = std::stoi(v);
    else if (k == "--bulk-mib") c.bulk_bytes = std::stoull(v) << 20;
    else if (k == "--window") c.window = std::stoi(v);
    else if (k == "--lanes") c.lanes = std::stoi(v);
    else if (k == "--small-count") c.small_count = std::stoull(v);
    else if (k == "--latency-count")
      c.latency_count = std::stoull(v);
    else if (k == "--beside-count")
      c.beside_count = std::stoull(v);
    else if (k == "--gap-us")
      c.gap_us = std::stoi(v);
    else if (k == "--spin-us")
      c.spin_us = std::stoi(v);
    else if (k == "--json") c.json = v;
    else Die("unknown flag " + k);
  }
  const uint64_t footprint = uint64_t{kBulk} * c.window;
  // The "beside" rows' small transfers land past the bulk slots.
  const uint64_t small_off = footprint;
  Target t = ForkTarget(footprint + kSmall, c.spin_us);  // fork before any thread exists here
  PrintHeader(c, AgentOptions{});
  std::vector<uint8_t> src(footprint, 7), dst(footprint, 0);
  auto tcp = MakeInitiator("tcp", c, t);
  auto shm = MakeInitiator("shm", c, t);
  auto tcp_lane = MakeInitiator("tcp", c, t, 0);  // lane threads send every frame
  auto shm_lane = MakeInitiator("shm", c, t, 0);
  auto tcp_bulk = MakeInitiator("tcp", c, t, -1, "-bulk");  // the "beside" rows' stream
  auto shm_bulk = MakeInitiator("shm", c, t, -1, "-bulk");
  // Bulk and small through one agent, one lane each (the 2 MiB is not striped:
  // the small one goes to the other, idle lane), as lanebench's mixed shape.
  auto tcp_one = MakeInitiator("tcp", c, t, -1, "-one", 1ull << 30);
  auto shm_one = MakeInitiator("shm", c, t, -1, "-one", 1ull << 30);
  for (Agent* a : {tcp.get(), shm.get(), tcp_lane.get(), shm_lane.get(), tcp_bulk.get(), shm_bulk.get(),
                   tcp_one.get(), shm_one.get()}) {
    if (!a->RegisterMemory(src.data(), footprint).ok() || !a->RegisterMemory(dst.data(), footprint).ok())
      Die("register");
  }
  const uint64_t nbulk = c.bulk_bytes / kBulk;
  const double gb = static_cast<double>(nbulk * kBulk) / 1e9;
  std::vector<Row> rows;
  if (c.latency_count > 0) {
    const uint64_t n = c.latency_count;
    auto echo = [&] { return RefEchoLatency(t.ref_port, n, kSmall, c.gap_us, src.data()); };
    for (Op op : {Op::kWrite, Op::kRead}) {
      const std::string o = op == Op::kWrite ? "WRITE" : "READ";
      uint8_t* local = op == Op::kWrite ? src.data() : dst.data();
      MeasureLatency(
          rows, "tcp 4 KiB " + o + " 1-at-a-time", c,
          [&] { return KvLatency(*tcp, op, kSmall, local, t.addr, n, c.gap_us); }, echo);
      MeasureLatency(
          rows, "tcp 4 KiB " + o + " lane sends", c,
          [&] { return KvLatency(*tcp_lane, op, kSmall, local, t.addr, n, c.gap_us); }, echo);
      MeasureLatency(
          rows, "shm 4 KiB " + o + " vs lane sends", c,
          [&] { return KvLatency(*shm, op, kSmall, local, t.addr, n, c.gap_us); },
          [&] { return KvLatency(*shm_lane, op, kSmall, local, t.addr, n, c.gap_us); });
    }
  }
  if (c.beside_count > 0) {
    const uint64_t n = c.beside_count;
    KvCase tb(*tcp_bulk, Op::kWrite, kBulk, c.window, src.data(), t.addr);
    KvCase sb(*shm_bulk, Op::kWrite, kBulk, c.window, src.data(), t.addr);
    auto tcp_stream = [&](const std::atomic<bool>& stop) { return tb.RunUntil(stop, kBulk); };
    auto shm_stream = [&](const std::atomic<bool>& stop) { return sb.RunUntil(stop, kBulk); };
    auto ref_stream = [&](const std::atomic<bool>& stop) {
      return RefSinkUntil(t.ref_port, kBulk, src.data(), footprint, stop);
    };
    auto echo = [&] { return RefEchoLatency(t.ref_port, n, kSmall, c.gap_us, src.data()); };
    auto echo_after_bulk = [&] {
      return RefEchoAfterBulk(t.ref_port, n, kSmall, c.gap_us, src.data(), kBulk);
    };
    for (Op op : {Op::kWrite, Op::kRead}) {
      const std::string o = op == Op::kWrite ? "WRITE" : "READ";
      uint8_t* local = op == Op::kWrite ? src.data() : dst.data();
      const uint64_t remote = t.addr + small_off;
      MeasureBeside(
          rows, "tcp 4 KiB " + o + " beside 2 MiB", c, tcp_stream,
          [&] { return KvLatency(*tcp, op, kSmall, local, remote, n, c.gap_us); }, ref_stream,
          echo);
      MeasureLatency(
          rows, "tcp 4 KiB " + o + " after 2 MiB post", c,
          [&] { return KvAfterBulk(*tcp, op, local, remote, *tcp_bulk, src.data(), t.addr, c); },
          echo_after_bulk);
      if (op == Op::kWrite && c.lanes >= 2) {
        MeasureLatency(
            rows, "tcp 4 KiB WRITE after 2 MiB post, one agent", c,
            [&] {
              return KvAfterBulk(*tcp_one, op, local, remote, *tcp_one, src.data(), t.addr, c);
            },
            echo_after_bulk);
        MeasureLatency(
            rows, "tcp 4 KiB WRITE after fresh 2 MiB post", c,
            [&] {
              return KvAfterBulk(*tcp, op, local, remote, *tcp_bulk, src.data(), t.addr, c, true);
            },
            echo_after_bulk);
        MeasureLatency(
            rows, "shm 4 KiB WRITE after 2 MiB post, one agent vs two", c,
            [&] { return KvAfterBulk(*shm_one, op, local, remote, *shm_one, src.data(), t.addr, c); },
            [&] { return KvAfterBulk(*shm, op, local, remote, *shm_bulk, src.data(), t.addr, c); });
      }
      MeasureLatency(
          rows, "shm 4 KiB " + o + " after 2 MiB post vs alone", c,
          [&] { return KvAfterBulk(*shm, op, local, remote, *shm_bulk, src.data(), t.addr, c); },
          [&] { return KvLatency(*shm, op, kSmall, local, remote, n, c.gap_us); });
      MeasureBeside(
          rows, "shm 4 KiB " + o + " beside 2 MiB vs alone", c, shm_stream,
          [&] { return KvLatency(*shm, op, kSmall, local, remote, n, c.gap_us); }, nullptr,
          [&] { return KvLatency(*shm, op, kSmall, local, remote, n, c.gap_us); });
    }
  }
  if (nbulk > 0) {
    KvCase w(*tcp, Op::kWrite, kBulk, c.window, src.data(), t.addr);
    rows.push_back(Measure({"tcp WRITE 2 MiB", "GB/s", "85"}, c, gb, [&] { return w.Run(nbulk); },
                           [&] { return RefSink(t.ref_port, nbulk * kBulk, kBulk, src.data(), footprint); }));
    KvCase r(*tcp, Op::kRead, kBulk, c.window, dst.data(), t.addr);
    rows.push_back(Measure({"tcp READ 2 MiB", "GB/s", "85"}, c, gb, [&] { return r.Run(nbulk); },
                           [&] { return RefSource(t.ref_port, nbulk * kBulk, kBulk, dst.data(), footprint); }));
    KvCase s(*tcp, Op::kWrite, kSmall, c.small_window, src.data(), t.addr);
    rows.push_back(Measure({"tcp 4 KiB WRITE, 64 outstanding", "kreq/s", ""}, c, c.small_count / 1e3,
                           [&] { return s.Run(c.small_count); },
                           [&] {
                             return RefEcho(t.ref_port, c.small_count, kSmall, c.small_window, src.data(),
                                            uint64_t{kSmall} * c.small_window);
                           }));
  }
  if (nbulk > 0) {
    KvCase w(*shm, Op::kWrite, kBulk, c.window, src.data(), t.addr);
    rows.push_back(Measure({"shm WRITE 2 MiB", "GB/s", "90"}, c, gb, [&] { return w.Run(nbulk); },
                           [&] { return RefMemcpy(dst.data(), src.data(), nbulk * kBulk, kBulk, footprint); }));
    KvCase r(*shm, Op::kRead, kBulk, c.window, dst.data(), t.addr);
    rows.push_back(Measure({"shm READ 2 MiB", "GB/s", "90"}, c, gb, [&] { return r.Run(nbulk); },
                           [&] { return RefMemcpy(dst.data(), src.data(), nbulk * kBulk, kBulk, footprint); }));
  }
  PrintTable(rows);
  if (!c.json.empty()) WriteJson(c.json, rows);
  close(t.to_child);
  return 0;
}

}  // namespace
}  // namespace kvlane::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return kvlane::bench::Main(argc, argv);
}
