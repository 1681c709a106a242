// Fill, wipe and verify of device pools on the GPU: one kernel launch per
// descriptor list (gpu/pattern_launch.h) over a table uploaded for it, on a
// non-blocking stream of its own (so it neither waits for nor holds up the
// engine's streams), waited for before returning. Built without CUDA every call
// returns NotSupported. Thread-safe.
#pragma once

#include <cstdint>

#include "device_table.h"
#include "kvlane/status.h"

namespace kvbench {

// REQUIRES: every table pointer is device memory of `device`.
kvlane::Status DeviceFill(int device, const PatternTable& table, uint32_t rank, uint64_t epoch);
kvlane::Status DeviceWipe(int device, const PatternTable& table, uint8_t byte);
kvlane::Result<gpu::VerifyTotals> DeviceVerify(int device, const PatternTable& table, uint32_t rank,
                                               uint64_t epoch);

}  // namespace kvbench
