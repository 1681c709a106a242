#include "burst_map.h"

#include "block_table.h"

namespace kvbench {
namespace {

uint32_t GroupSlots(const PoolList& list, size_t g) {
  uint32_t end = g + 1 < list.group_first.size() ? list.group_first[g + 1]
                                                 : static_cast<uint32_t>(list.extents.size());
  return end - list.group_first[g];
}

// Appends request r's indices for group g, drawn from `table`.
void AppendSlice(const BlockTable& table, const PoolList& list, size_t g, uint64_t r,
                 uint64_t descs, std::vector<uint32_t>* out) {
  for (uint64_t slot : table.Slice(r, descs)) {
    out->push_back(list.group_first[g] + static_cast<uint32_t>(slot));
  }
}

}  // namespace

PoolList MakePoolList(const PoolLayout& layout, const std::vector<GroupDemand>& demand) {
  PoolList list;
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    const GroupLayout& gl = layout.groups[g];
    uint64_t desc = demand[g].desc_bytes;
    list.group_first.push_back(static_cast<uint32_t>(list.extents.size()));
    uint64_t slots = desc ? gl.Slots(desc) : 0;
    for (uint64_t s = 0; s < slots; ++s) list.extents.push_back({gl.SlotOffset(desc, s), desc});
  }
  return list;
}

BurstMap MakeBurstMap(const PoolList& list, const std::vector<GroupDemand>& demand, uint64_t batch,
                      uint64_t seed) {
  BurstMap map;
  map.target.resize(batch);
  map.initiator.resize(batch);
  for (size_t g = 0; g < demand.size(); ++g) {
    if (demand[g].descs == 0) continue;
    BlockTable target(seed, 2 * g + static_cast<uint64_t>(Side::kTarget), GroupSlots(list, g));
    BlockTable initiator(seed, 2 * g + static_cast<uint64_t>(Side::kInitiator),
                         GroupSlots(list, g));
    for (uint64_t r = 0; r < batch; ++r) {
      AppendSlice(target, list, g, r, demand[g].descs, &map.target[r]);
      AppendSlice(initiator, list, g, r, demand[g].descs, &map.initiator[r]);
    }
    map.burst_bytes += batch * demand[g].bytes();
  }
  return map;
}

}  // namespace kvbench
