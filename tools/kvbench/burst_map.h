// BurstMap: which pool descriptors each request of a burst moves. Both ranks
// build the same map from (plan point, batch, seed): a pool list with one extent
// per slot of every group, and per request the indices of its local and remote
// descriptors (disjoint slices of seeded block tables). Plain values.
#pragma once

#include <cstdint>
#include <vector>

#include "pool_layout.h"
#include "workload.h"

namespace kvbench {

struct Extent {
  uint64_t offset = 0;  // from the pool base
  uint64_t len = 0;
};

// Every slot of every group, group after group, for one demand shape.
struct PoolList {
  std::vector<Extent> extents;
  std::vector<uint32_t> group_first;  // index of each group's first extent
};

PoolList MakePoolList(const PoolLayout& layout, const std::vector<GroupDemand>& demand);

// Block-table streams: the initiator's (local) blocks and the target's (remote)
// blocks come from two different permutations of the same slots.
enum class Side : uint64_t { kTarget = 0, kInitiator = 1 };

struct BurstMap {
  // [request][pair]: index into PoolList::extents. Pair i of a request pairs
  // target[request][i] with initiator[request][i]; both have the same length.
  std::vector<std::vector<uint32_t>> target;
  std::vector<std::vector<uint32_t>> initiator;
  uint64_t burst_bytes = 0;
};

// REQUIRES: the layout holds `batch` requests of `demand`.
BurstMap MakeBurstMap(const PoolList& list, const std::vector<GroupDemand>& demand, uint64_t batch,
                      uint64_t seed);

}  // namespace kvbench
