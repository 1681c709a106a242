// A pool list of one extent and a burst that pairs it with itself: the contig
// workload at batch 1 (each rank's one request at the same offset), for the
// references' tests (host and device). Header-only.
#pragma once

#include <cstdint>

#include "burst_map.h"

namespace kvbench::testing {

struct SelfPair {
  PoolList list;
  BurstMap map;
};

// One extent [0, len) whose READ and WRITE both copy it onto itself.
inline SelfPair OneExtentPairedWithItself(uint64_t len) {
  SelfPair p;
  p.list.extents = {{0, len}};
  p.list.group_first = {0};
  p.map.target = {{0}};
  p.map.initiator = {{0}};
  p.map.burst_bytes = len;
  return p;
}

}  // namespace kvbench::testing
