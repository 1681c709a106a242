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
#include "plan.h"
#include "stats.h"
#include "verdict.h"

namespace kvbench {

// 2: request_ms holds every measured sample ([sample][request]) and p50_sample
// names the median one; version 1 documents (one flat array) are still read.
// 3: the ranks' pools may be in different memory (--memory TARGET,INITIATOR):
// implementation.per_rank gives each rank's memory, staging and GPU;
// implementation.memory (and pool.memory) is then the pair ("cuda,host") and
// staging is "pinned-host" when either rank stages. When both ranks agree these
// keys mean what they meant in version 2, and version 2 documents are still read.
// 4: a document may hold part of its grid (a run stopped by a signal keeps the rows
// that finished): "complete" says whether "rows" holds every planned row,
// "rows_missing" lists those it lacks, "stopped_by" and "stopped_rank" name the
// signal and the rank it stopped. Older documents, without "complete", are complete.
// "running": true (added in version 4 without changing it) marks the initiator's
// checkpoint, written after a row (the last one too, before the run's closing
// exchange): such a document is partial all the same ("complete": false, even with no
// row missing; an older reader, ignoring the key, takes it for a run ended early),
// and the final write of the run replaces it. implementation.pool's
// "host_memory_bound" and "shared_host_memory_bound" were added in version 4 too.
inline constexpr int kDocumentVersion = 4;

// The same bytes moved by the plainest path (memcpy, or a plain socket loop).
struct ReferenceFigures {
  // "memcpy" | "cudaMemcpy" | "socket" | "socket-staged" (both ranks staged through pinned
  // host memory) | "socket-staged-target" | "socket-staged-initiator" (one rank did)
  std::string method;
  double p50_ms = 0;
  double gbps_p50 = 0;
};

struct RowResult {
  std::string op;  // "pull" (READ, lands on the initiator) | "push" (WRITE, lands on the target)
  uint64_t isl = 0;
  uint64_t batch = 0;
  uint64_t descs = 0;  // per request
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
  std::string version;  // its build (kvlane::VersionString, its git revision); empty: unknown
};

// Whether a run measured every row it planned. A run stopped by a signal keeps the
// rows that finished (the row in flight is dropped, never kept half-measured); a
// run-level error (a failed socket reference, a lost peer) ends a run early too; and
// a run still going writes its rows so far after each row (a checkpoint, `running`),
// which is what is left when it is killed outright (SIGKILL) or its host crashes.
struct Completeness {
  bool complete = true;         // every planned row is in the document's rows
  std::string stopped_by;       // the signal that cut the run short ("SIGINT"); empty if none
  std::string stopped_rank;     // the rank it stopped: "initiator" | "target"; empty if none
  std::vector<RowKey> missing;  // the planned rows not measured, in plan order
  // A checkpoint: written while the run went on, after a row (the last one too: until
  // the final write `complete` is false, even with no row missing). Read after the
  // run, no later write came (killed outright, a crash); or the run still goes on.
  // REQUIRES (when true): !complete and stopped_by empty.
  bool running = false;
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
  Completeness completeness;
  // Provenance (common/environment.h), each written only when set: the initiator's
  // command line, and its host (CPU model, kernel, load average at the start and
  // "loadavg_end"...). Added in version 4 without changing it: readers ignore them.
  std::string command;
  nlohmann::json environment;
};

nlohmann::json RowToJson(const RowResult& row);
kvlane::Result<RowResult> RowFromJson(const nlohmann::json& j);
nlohmann::json DocumentToJson(const CaseDocument& doc);

// What a run that planned `planned` and measured `rows` lacks. The stop (a signal
// name and a rank) is kept only when it cut a row: a stop after the last row leaves
// the run complete.
Completeness CompletenessOf(const std::vector<RowKey>& planned, const std::vector<RowResult>& rows,
                            const std::string& stopped_by, const std::string& stopped_rank);
// A document's "complete", "rows_missing", "stopped_by", "stopped_rank" and "running"
// (absent: false); a document without "complete" (version 3 and older) is complete.
// InvalidArgument when a field has another type.
kvlane::Result<Completeness> CompletenessFromJson(const nlohmann::json& doc);
// "pull isl 8192 batch 2, push isl 8192 batch 2"
std::string DescribeRows(const std::vector<RowKey>& rows);

// The pool memory an implementation section records ("host" | "cuda", or the
// pair "cuda,host" | "host,cuda" of a version 3 mixed run, target first): its
// "memory", else (older documents) "pool.memory", else the transport's own memory.
std::string DocumentMemory(const nlohmann::json& implementation);
// One rank's ("target" | "initiator") pool memory and staging ("pinned-host" |
// "none"): its "per_rank" entry (version 3), else (version 2 and older: both
// ranks alike) DocumentMemory and "staging".
std::string RankMemory(const nlohmann::json& implementation, const std::string& role);
std::string RankStaging(const nlohmann::json& implementation, const std::string& role);
// The memory as summaries print it: "host", "cuda", or "cuda, staged through pinned
// host memory" when the section's "staging" says so; when the ranks differ, each
// rank's: "target cuda (staged through pinned host memory), initiator host".
std::string DescribeMemory(const nlohmann::json& implementation);

// Pretty-printed with two-space indents, except that an array holding no arrays
// or objects stays on one line (a request_ms sample is one line, not batch lines).
std::string DumpCompact(const nlohmann::json& j);

using kvlane::UtcTimestamp;  // "2026-11-30T03:05:52Z"

}  // namespace kvbench
