// RunSpec: everything one process group of a lanebench run needs, written by the
// orchestrator into the run directory and read by the source and target workers.
// Plain values; copy freely.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvlane/status.h"
#include "kvlane/transfer.h"

namespace lanebench {

// One transfer of an iteration: `bytes` to target `peer`, at `remote_offset` in
// that target's buffer, pinned to data lane `lane` of that peer.
struct XferSpec {
  std::string name;  // "bulk", "small" or "xfer"
  int peer = 0;
  int lane = 0;
  uint64_t bytes = 0;
  uint64_t remote_offset = 0;
};

// --inject-fault, parsed (fault.h): what is done to which measured iteration.
struct FaultSpec {
  std::string kind = "none";  // "none", "flip-byte", "repost" or "stop-peer"
  int iteration = 0;          // the measured iteration (from 1) it hits; 0 for none
  std::string xfer;           // the transfer's name; "": the iteration's first
};

struct RunSpec {
  std::string transport;  // "tcp", "shm", "cuda"
  std::string memory;     // "host" or "device" (see buffers.h)
  std::string policy;     // "global-fifo" or "independent"
  std::string op;         // "read" or "write"
  int lanes_per_peer = 1;
  int64_t spin_us = -1;  // see BenchConfig::spin_us
  int64_t proxy_renew_us = -1;  // see BenchConfig::proxy_renew_us
  int64_t post_inline_bytes = -1;  // see BenchConfig::post_inline_bytes
  int poller_cpu = -1;   // --pin: the source's polling thread's CPU (-1: no pinning)
  std::vector<int> worker_cpus;  // --pin: every other thread's CPUs
  int stall_probe_ms = 100;      // the source's host-stall probe before its iterations (0: none)
  int64_t idle_us = 0;           // BenchConfig::idle_us, resolved
  FaultSpec fault;               // --inject-fault (testing only)
  int warmup = 20;
  int iters = 100;
  double timeout_s = 120;
  std::vector<uint64_t> target_bytes;  // buffer size of each target process
  std::vector<XferSpec> xfers;         // posted in this order every iteration
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(XferSpec, name, peer, lane, bytes, remote_offset)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FaultSpec, kind, iteration, xfer)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RunSpec, transport, memory, policy, op, lanes_per_peer, spin_us,
                                   proxy_renew_us, post_inline_bytes, poller_cpu, worker_cpus,
                                   stall_probe_ms, idle_us, fault, warmup, iters, timeout_s,
                                   target_bytes, xfers)

kvlane::Status WriteJsonFile(const std::string& path, const nlohmann::json& j);
kvlane::Status WriteJsonFile(const std::string& path, const nlohmann::ordered_json& j);
kvlane::Result<nlohmann::json> ReadJsonFile(const std::string& path);
kvlane::Result<RunSpec> ReadSpec(const std::string& dir);

// Paths inside a run directory.
std::string SpecPath(const std::string& dir);
std::string ResultPath(const std::string& dir);

}  // namespace lanebench
