// CaseDocument: everything one case (one workload over one transport) measured,
// as one versioned JSON document. Summaries are rendered from these alone.
// Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvlane/provenance.h"
#include "kvlane/status.h"
#include "stats.h"
#include "verdict.h"

namespace kvbench {

// 2: request_ms holds every measured sample ([sample][request]) and p50_sample
// names the median one; version 1 documents (one flat array) are still read.
inline constexpr int kDocumentVersion = 2;

// The same bytes moved by the plainest path (memcpy, or a plain socket loop).
struct ReferenceFigures {
  std::string method;  // "memcpy" | "cudaMemcpy" | "socket" | "none"
  double p50_ms = 0;
  double gbps_p50 = 0;
};

struct RowResult {
  std::string op;  // "pull" (READ, lands on the initiator) | "push" (WRITE, lands on the target)
  uint64_t isl = 0;
  uint64_t batch = 0;
  uint64_t descs = 0;      // per request
  uint64_t segments =
      0;  // per burst, after the engine merged adjacent pairs (Agent::Describe); 0: not recorded
  uint64_t req_bytes = 0;  // per request
  Summary burst_ms;
  // [sample][request]: each request's completion offset from its burst's start,
  // for every measured burst in the order they ran (trial after trial).
  std::vector<std::vector<double>> request_ms;
  uint64_t p50_sample = 0;  // index into request_ms of the burst whose time is burst_ms.p50
  double prep_ms = 0;       // preparing the burst's transfers (once per row)
  double gbps_p50 = 0;
  double gbps_p50_incl_prep = 0;
  Verdict verdict = Verdict::kNoVerifier;
  std::string verify_detail;  // bytes checked, mismatches, first offset, or the error
  ReferenceFigures reference;
};

struct RankInfo {
  int rank = 0;
  std::string role;  // "target" | "initiator"
  std::string hostname;
  std::vector<std::string> devices;  // memory the pool lives in, e.g. "host"
};

struct CaseDocument {
  std::string case_name;
  std::string timestamp;    // UTC, ISO 8601
  nlohmann::json workload;  // the plan: groups, points, layout, options
  int warmup = 0;
  int samples = 0;
  int trials = 0;
  std::vector<RowResult> rows;
  nlohmann::json implementation;  // backend, transport, memory, lanes, version, git, filter
  std::vector<RankInfo> ranks;
  std::string link;                          // "loopback", "same-host", "network"
  std::vector<std::string> invalid_reasons;  // empty: the outcome is valid
};

nlohmann::json RowToJson(const RowResult& row);
kvlane::Result<RowResult> RowFromJson(const nlohmann::json& j);
nlohmann::json DocumentToJson(const CaseDocument& doc);

// The pool memory an implementation section records ("host" | "cuda"): its
// "memory", else (older documents) "pool.memory", else the transport's own memory.
std::string DocumentMemory(const nlohmann::json& implementation);
// The memory as summaries print it: "host", "cuda", or "cuda, staged through pinned
// host memory" when the section's "staging" says so.
std::string DescribeMemory(const nlohmann::json& implementation);

// Pretty-printed with two-space indents, except that an array holding no arrays
// or objects stays on one line (a request_ms sample is one line, not batch lines).
std::string DumpCompact(const nlohmann::json& j);

using kvlane::UtcTimestamp;  // "2026-11-30T03:05:52Z"

}  // namespace kvbench
