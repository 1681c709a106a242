#include "plan.h"

#include <algorithm>

#include "fault.h"
#include "oracle.h"
#include "pinning.h"

namespace lanebench {
namespace {

bool OneOf(const std::string& v, std::initializer_list<const char*> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return v == a; });
}

RunSpec BaseSpec(const BenchConfig& cfg) {
  RunSpec s;
  s.transport = cfg.transport;
  s.memory = cfg.ResolvedMemory();
  s.warmup = cfg.warmup;
  s.iters = cfg.iters;
  s.timeout_s = cfg.timeout_s;
  s.spin_us = cfg.spin_us;
  s.proxy_renew_us = cfg.proxy_renew_us;
  s.post_inline_bytes = cfg.post_inline_bytes;
  s.stall_probe_ms = cfg.stall_probe_ms;
  s.idle_us = cfg.ResolvedIdleUs();
  const kvlane::Result<FaultSpec> fault = ParseFault(cfg.inject_fault, cfg.iters, cfg.shape);
  if (fault.ok()) s.fault = fault.value();  // Validate() refused a bad one
  if (PinResolved(cfg.pin)) {
    const CpuSplit split = SplitCpus();
    s.poller_cpu = split.poller;
    s.worker_cpus = split.workers;
  }
  return s;
}

Case MixedCase(const BenchConfig& cfg) {
  Case c{MixedId(cfg), "mixed", cfg.mixed_op, cfg.bulk_bytes + cfg.small_bytes, BaseSpec(cfg)};
  c.spec.op = cfg.mixed_op;
  if (cfg.mixed_peers == 2) {  // one data lane to each of two target processes
    c.spec.lanes_per_peer = 1;
    c.spec.target_bytes = {cfg.bulk_bytes, cfg.small_bytes};
    c.spec.xfers = {{"bulk", 0, 0, cfg.bulk_bytes, 0}, {"small", 1, 0, cfg.small_bytes, 0}};
  } else {  // two lanes of one target
    c.spec.lanes_per_peer = 2;
    c.spec.target_bytes = {cfg.bulk_bytes + cfg.small_bytes};
    c.spec.xfers = {{"bulk", 0, 0, cfg.bulk_bytes, 0},
                    {"small", 0, 1, cfg.small_bytes, cfg.bulk_bytes}};
  }
  return c;
}

Case SingleCase(const BenchConfig& cfg, const std::string& op, uint64_t bytes) {
  Case c{"single-" + op + "-" + SizeName(bytes), "single", op, bytes, BaseSpec(cfg)};
  c.spec.op = op;
  c.spec.lanes_per_peer = 1;
  c.spec.target_bytes = {bytes};
  c.spec.xfers = {{"xfer", 0, 0, bytes, 0}};
  return c;
}

}  // namespace

// The largest transfer size a flag may ask for (each run allocates it per peer).
constexpr uint64_t kMaxBytes = 1ull << 30;
// The largest --warmup, --iters and --pairs.
constexpr int kMaxCount = 1000000;

kvlane::Status BenchConfig::Validate() const {
  auto bad = [](const std::string& m) { return kvlane::Status::InvalidArgument(m); };
  if (!OneOf(transport, {"tcp", "shm", "cuda"})) return bad("--transport: tcp|shm|cuda");
  if (!memory.empty() && !OneOf(memory, {"host", "device"})) return bad("--memory: host|device");
  if (!OneOf(shape, {"mixed", "single", "all"})) return bad("--shape: mixed|single|all");
  if (!OneOf(mixed_op, {"read", "write"})) return bad("--mixed-op: read|write");
  for (auto op = single_ops.begin(); op != single_ops.end(); ++op) {
    if (!OneOf(*op, {"read", "write"})) return bad("--single-ops: read|write");
    if (std::find(single_ops.begin(), op, *op) != op)  // the case would run twice, one name
      return bad("--single-ops: names " + *op + " twice");
  }
  for (auto b = single_bytes.begin(); b != single_bytes.end(); ++b)
    if (std::find(single_bytes.begin(), b, *b) != b)
      return bad("--single-bytes: names " + std::to_string(*b) + " twice");
  if (shape != "mixed" && (single_ops.empty() || single_bytes.empty()))
    return bad("--single-ops and --single-bytes: at least one each");
  for (uint64_t b : single_bytes)
    if (b < kMarkerBytes || b > kMaxBytes)
      return bad("--single-bytes: 8 bytes (the epoch marker) .. 1 GiB each");
  if (bulk_bytes < kMarkerBytes || bulk_bytes > kMaxBytes)
    return bad("--bulk-bytes: 8 bytes (the epoch marker) .. 1 GiB");
  if (small_bytes < kMarkerBytes || small_bytes > kMaxBytes)
    return bad("--small-bytes: 8 bytes (the epoch marker) .. 1 GiB");
  if (mixed_peers != 1 && mixed_peers != 2) return bad("--mixed-peers: 1 or 2");
  // At most kMaxCount each (kvbench's bound for its counts): a run's iterations
  // and a plan's runs stay far from int's range, and a typo cannot ask for days.
  auto count = [&](const char* flag, int v, int min) {
    return v < min || v > kMaxCount
               ? bad(std::string(flag) + " " + std::to_string(v) + ": need at least " +
                     std::to_string(min) + " and at most " + std::to_string(kMaxCount))
               : kvlane::Status::Ok();
  };
  KVLANE_RETURN_IF_ERROR(count("--warmup", warmup, 0));
  KVLANE_RETURN_IF_ERROR(count("--iters", iters, 1));
  KVLANE_RETURN_IF_ERROR(count("--pairs", pairs, 1));
  if (!(timeout_s >= 0.1 && timeout_s <= 86400)) return bad("--timeout: 0.1..86400 seconds");
  if (spin_us < -1 || spin_us > 1000000) return bad("--spin-us: -1 (engine default) or 0..1000000");
  if (!OneOf(pin, {"auto", "on", "off"})) return bad("--pin: auto|on|off");
  if (proxy_renew_us < -1 || (proxy_renew_us > 0 && proxy_renew_us < 100) ||
      proxy_renew_us > 1000000)
    return bad("--proxy-renew-us: -1 (engine default), 0 (off) or 100..1000000");
  if (post_inline_bytes < -1 || post_inline_bytes > (1 << 20))
    return bad("--post-inline-bytes: -1 (engine default) or 0..1048576");
  if (stall_probe_ms < 0 || stall_probe_ms > 10000) return bad("--stall-probe-ms: 0..10000");
  if (idle_us < -1 || idle_us > 1000000) return bad("--idle-us: -1 (per transport) or 0..1000000");
  if (pin == "on" && SplitCpus().poller < 0) return bad("--pin on: needs at least 2 CPUs");
  KVLANE_RETURN_IF_ERROR(ParseFault(inject_fault, iters, shape).status());
  return kvlane::Status::Ok();
}

int64_t BenchConfig::ResolvedIdleUs() const {
  if (idle_us >= 0) return idle_us;
  return transport == "cuda" ? 0 : 3000;
}

std::string BenchConfig::ResolvedMemory() const {
  if (!memory.empty()) return memory;
  return transport == "cuda" ? "device" : "host";
}

std::vector<std::string> ArmOrder(int pair) {
  if (pair % 2 == 0) return {kBaseline, kCandidate};
  return {kCandidate, kBaseline};
}

size_t PlannedRuns(const BenchConfig& cfg, size_t cases) {
  return cases * static_cast<size_t>(cfg.pairs) * 2;
}

int64_t PlannedRunIterations(const BenchConfig& cfg, size_t cases) {
  return static_cast<int64_t>(PlannedRuns(cfg, cases)) * cfg.iters;
}

std::vector<PlannedRun> RunOrder(const BenchConfig& cfg, size_t cases) {
  std::vector<PlannedRun> order;
  for (int pair = 0; pair < cfg.pairs; ++pair)
    for (size_t c = 0; c < cases; ++c) {
      const std::vector<std::string> arms = ArmOrder(pair);
      for (int pos = 0; pos < static_cast<int>(arms.size()); ++pos)
        order.push_back({c, arms[pos], pair, pos});
    }
  return order;
}

std::string MixedId(const BenchConfig& cfg) { return "mixed-" + cfg.mixed_op; }

std::string IsolationControlId(const BenchConfig& cfg) {
  return "single-" + cfg.mixed_op + "-" + SizeName(cfg.small_bytes);
}

std::vector<Case> BuildCases(const BenchConfig& cfg) {
  std::vector<Case> cases;
  if (cfg.shape != "single") cases.push_back(MixedCase(cfg));
  if (cfg.shape == "mixed") return cases;
  for (const std::string& op : cfg.single_ops)
    for (uint64_t bytes : cfg.single_bytes) cases.push_back(SingleCase(cfg, op, bytes));
  // The isolation control right after the mixed case: they run next to each other.
  const std::string control = IsolationControlId(cfg);
  const auto it =
      std::find_if(cases.begin(), cases.end(), [&](const Case& c) { return c.id == control; });
  if (cfg.shape == "all" && it != cases.end()) std::rotate(cases.begin() + 1, it, it + 1);
  return cases;
}

std::string SizeName(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

}  // namespace lanebench
