#include "workload.h"

#include <string>

namespace kvbench {
namespace {

constexpr uint64_t kDsv4PageAlign = 576;
constexpr int kDsv4StateBytes = 584;    // 448 NoPE + 128 RoPE + 8 scale
constexpr int kDsv4IndexerBytes = 132;  // 128 fp8 + 4 scale
constexpr int kDsv4SwaBlock = 64;
constexpr int kDsv4SwaWindow = 128;
constexpr int kMlaLayers = 61;
constexpr int kMlaElementsPerToken = 704;  // 512 + 64 rope + 128 indexer

Group Dsv4Group(std::string name, int layers, int block, int tokens_per_state, int state_bytes,
                int window) {
  Group g;
  g.name = std::move(name);
  g.layers = layers;
  g.block_tokens = block;
  g.tokens_per_state = tokens_per_state;
  g.state_bytes = state_bytes;
  uint64_t states = static_cast<uint64_t>(block / tokens_per_state);
  g.page_bytes = RoundUp(states * static_cast<uint64_t>(state_bytes), kDsv4PageAlign);
  g.packed_bytes = g.page_bytes * static_cast<uint64_t>(layers);
  g.window_tokens = window;
  return g;
}

// `workload` (kv-dsv4, or contig, which carries a kv-dsv4 request's bytes) names
// the workload the user asked for in the error.
kvlane::Result<std::vector<Group>> Dsv4Groups(int block, const std::string& workload) {
  if (block <= 0 || block % 128 != 0) {
    return kvlane::Status::InvalidArgument(
        workload + ": block " + std::to_string(block) + " splits an HCA state" +
        (workload == "kv-dsv4" ? "" : " of the kv-dsv4 request it carries") +
        " (c128a folds 128 tokens into one state); use a multiple of 128");
  }
  return std::vector<Group>{
      Dsv4Group("c4a", 30, block, 4, kDsv4StateBytes, 0),
      Dsv4Group("c4a-idx", 30, block, 4, kDsv4IndexerBytes, 0),
      Dsv4Group("c128a", 31, block, 128, kDsv4StateBytes, 0),
      Dsv4Group("swa", 61, kDsv4SwaBlock, 1, kDsv4StateBytes, kDsv4SwaWindow),
  };
}

kvlane::Result<std::vector<Group>> MlaGroups(int page_tokens, const std::string& dtype) {
  if (page_tokens != 16 && page_tokens != 64) {
    return kvlane::Status::InvalidArgument("kv-mla: page_tokens (--block) must be 16 or 64, got " +
                                           std::to_string(page_tokens));
  }
  int elem = dtype == "bf16" ? 2 : dtype == "fp8" ? 1 : 0;
  if (elem == 0) {
    return kvlane::Status::InvalidArgument("kv-mla: dtype must be bf16 or fp8, got " + dtype);
  }
  Group g;
  g.name = "mla";
  g.layers = kMlaLayers;
  g.block_tokens = page_tokens;
  g.state_bytes = kMlaElementsPerToken * elem;
  g.page_bytes = static_cast<uint64_t>(page_tokens) * g.state_bytes;
  g.packed_bytes = g.page_bytes;
  g.descs_per_block = kMlaLayers;
  return std::vector<Group>{g};
}

}  // namespace

uint64_t RoundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

uint64_t BlocksFor(uint64_t isl, uint64_t block_tokens, uint64_t window_tokens) {
  uint64_t last = (isl + block_tokens - 1) / block_tokens;  // one past the last block
  if (window_tokens == 0 || isl <= window_tokens) return last;
  uint64_t first = (isl - window_tokens) / block_tokens;
  return last - first;
}

kvlane::Result<Workload> Workload::Make(const WorkloadSpec& spec) {
  Workload w;
  w.name_ = spec.name;
  if (spec.name == "kv-dsv4" || spec.name == "contig") {
    if (!spec.dtype.empty()) {  // it would change nothing, yet read as if it had
      return kvlane::Status::InvalidArgument(
          spec.name + ": --dtype " + spec.dtype +
          " applies to kv-mla only; the model fixes kv-dsv4's state sizes" +
          (spec.name == "contig" ? " (contig carries a kv-dsv4 request's bytes)" : ""));
    }
    w.block_ = spec.block == 0 ? 256 : spec.block;
    KVLANE_ASSIGN_OR_RETURN(w.groups_, Dsv4Groups(w.block_, spec.name));
    if (spec.name == "contig") w.MakeContig();
  } else if (spec.name == "kv-mla") {
    w.block_ = spec.block == 0 ? 64 : spec.block;
    w.dtype_ = spec.dtype.empty() ? "bf16" : spec.dtype;
    KVLANE_ASSIGN_OR_RETURN(w.groups_, MlaGroups(w.block_, w.dtype_));
  } else {
    return kvlane::Status::InvalidArgument("unknown workload '" + spec.name +
                                           "' (kv-dsv4, kv-mla, contig)");
  }
  return w;
}

void Workload::MakeContig() {
  source_groups_ = std::move(groups_);
  Group g;
  g.name = "contig";
  g.layers = 1;
  g.block_tokens = block_;
  groups_ = {g};  // page and descriptor sizes follow the request (see Demand)
}

std::vector<GroupDemand> Workload::Demand(uint64_t isl) const {
  std::vector<GroupDemand> out;
  uint64_t total = 0;
  for (const Group& g : source_groups_.empty() ? groups_ : source_groups_) {
    uint64_t blocks = BlocksFor(isl, g.block_tokens, g.window_tokens);
    GroupDemand d{g.packed_bytes, blocks * static_cast<uint64_t>(g.descs_per_block)};
    total += d.bytes();
    out.push_back(d);
  }
  if (!source_groups_.empty()) return {GroupDemand{total, 1}};
  return out;
}

uint64_t Workload::RequestDescs(uint64_t isl) const {
  uint64_t n = 0;
  for (const GroupDemand& d : Demand(isl)) n += d.descs;
  return n;
}

uint64_t Workload::RequestBytes(uint64_t isl) const {
  uint64_t n = 0;
  for (const GroupDemand& d : Demand(isl)) n += d.bytes();
  return n;
}

}  // namespace kvbench
