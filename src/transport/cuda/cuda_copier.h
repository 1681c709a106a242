// The cuda build's device staging (core/device_copier.h): tcp moves device
// memory through a copier's two pinned host halves, on a stream per half and
// device, as AgentOptions::staging_copy says: copy-engine batches
// (staging_batch.h), one cudaMemcpyAsync per range, or a copy kernel for short
// ranges (staging_kernel.h). How many copiers may be alive at once is
// core/staging_quota.h's (MakeDeviceCopier), not this file's.
#pragma once

#include <memory>

#include "core/device_copier.h"

namespace kvlane::core {

// Bytes of each half of a copier: with two halves, 2 MiB pinned per staging
// thread (a tcp lane's sender and receiver, a target connection).
inline constexpr size_t kStagingHalfBytes = 1u << 20;

// nullptr when no GPU is visible (or no driver).
std::unique_ptr<DeviceStaging> MakeCudaStaging();

}  // namespace kvlane::core
