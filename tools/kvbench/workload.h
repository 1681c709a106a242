// Workloads: how one request of `isl` tokens is cut into descriptors.
// Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlane/status.h"

namespace kvbench {

// One cache group: a family of equally sized descriptors inside the pool.
struct Group {
  std::string name;
  int layers = 0;
  int block_tokens = 0;       // tokens covered by one physical block of this group
  int tokens_per_state = 1;   // tokens folded into one stored state
  int state_bytes = 0;        // bytes of one stored state (per layer)
  uint64_t page_bytes = 0;    // one layer's page: states padded as the workload says
  uint64_t packed_bytes = 0;  // bytes of one descriptor of this group
  int descs_per_block = 1;    // 1 when layers are packed; `layers` when per-layer
  int window_tokens = 0;      // > 0: only the blocks covering the last window tokens
};

// What one request needs from one group at a given ISL.
struct GroupDemand {
  uint64_t desc_bytes = 0;  // bytes of each descriptor
  uint64_t descs = 0;       // descriptors per request
  uint64_t bytes() const { return desc_bytes * descs; }
};

struct WorkloadSpec {
  std::string name = "kv-dsv4";  // kv-dsv4 | kv-mla | contig
  int block = 0;               // model block (kv-dsv4, contig) or page_tokens (kv-mla); 0 = default
  // kv-mla only: bf16 | fp8; empty: bf16. Refused for kv-dsv4 and contig, whose
  // state sizes the model fixes (docs/METHODOLOGY.md).
  std::string dtype;
};

class Workload {
 public:
  // Validates the spec; fails closed on block sizes the model cannot use.
  static kvlane::Result<Workload> Make(const WorkloadSpec& spec);

  const std::string& name() const { return name_; }
  int block() const { return block_; }
  const std::string& dtype() const { return dtype_; }  // kv-mla's; empty for the others
  const std::vector<Group>& groups() const { return groups_; }
  // Per group (same order as groups()): the request's descriptors at `isl` tokens.
  std::vector<GroupDemand> Demand(uint64_t isl) const;
  uint64_t RequestDescs(uint64_t isl) const;
  uint64_t RequestBytes(uint64_t isl) const;

 private:
  std::string name_;
  int block_ = 0;
  std::string dtype_;
  void MakeContig();

  std::vector<Group> groups_;         // what the pool is made of
  std::vector<Group> source_groups_;  // contig: the kv-dsv4 groups whose bytes it carries
};

// Blocks of `block_tokens` needed for `isl` tokens (window_tokens > 0: only the
// blocks covering the last window_tokens tokens).
uint64_t BlocksFor(uint64_t isl, uint64_t block_tokens, uint64_t window_tokens);

uint64_t RoundUp(uint64_t value, uint64_t multiple);

}  // namespace kvbench
