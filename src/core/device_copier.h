// DeviceCopier: moves bytes between device memory and host staging buffers for
// a transport that cannot reach device memory itself (tcp stages it, see
// transport/stream/staged_io.h). The cuda build makes them
// (transport/cuda/cuda_copier.h); tests install a fake (SetDeviceStagingForTest).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "core/staging_quota.h"
#include "kvlane/options.h"
#include "kvlane/status.h"

namespace kvlane::core {

// One thread's staging: two host buffers ("halves", capacity() bytes each,
// memory the device copies reach at full speed) and an ordered queue of copies
// per half, so that one half fills or drains while the other is on the wire.
// Not thread-safe: one per thread; owns its buffers.
class DeviceCopier {
 public:
  static constexpr int kHalves = 2;
  virtual ~DeviceCopier() = default;

  virtual size_t capacity() const = 0;
  virtual uint8_t* half(int h) = 0;
  // Queues a copy of `len` bytes of device memory at `src` into half `h` at
  // offset `at`. REQUIRES: at + len <= capacity().
  virtual Status ToHost(int h, size_t at, const void* src, size_t len) = 0;
  // Queues a copy of `len` bytes of half `h` at offset `at` into device memory at `dst`.
  virtual Status ToDevice(int h, size_t at, void* dst, size_t len) = 0;
  // Starts the copies queued on half `h` that the copier held back to batch
  // them (the cuda copier moves small ranges with one kernel launch per
  // window). Call it once a window is queued, so that the window copies while
  // the caller does something else; Wait(h) starts what is still held. An
  // error here (the held copies did not start) is returned by Wait(h) too.
  virtual Status Flush(int h) = 0;
  // Waits until every copy queued on half `h` finished; their first error.
  virtual Status Wait(int h) = 0;

  // The copier's place in the process's StagingQuota (MakeDeviceCopier); given
  // back after the derived destructor freed the buffers.
  void HoldQuota(StagingQuota::Ticket ticket) { quota_ = std::move(ticket); }

 private:
  StagingQuota::Ticket quota_;
};

// Makes copiers. Thread-safe.
class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  // A copier for the calling thread. `first`: device memory it will move first;
  // its device becomes the thread's current one (a staging thread then holds a
  // context on that GPU only). `how`: AgentOptions::staging_copy. Counts no
  // copiers (MakeDeviceCopier does).
  virtual Result<std::unique_ptr<DeviceCopier>> MakeCopier(const void* first, StagingCopy how) = 0;
};

// This process's staging: the cuda build's when a GPU is visible, else
// nullptr (device memory cannot be staged). Probed once; never freed.
DeviceStaging* ProcessDeviceStaging();

// A copier from ProcessDeviceStaging() for the calling thread (`first`, `how`:
// see MakeCopier), holding a place in ProcessStagingQuota() for the
// connections of peer `peer` (empty: this process's own lanes) while it lives;
// kNotSupported when this process has none (no GPU), kNotAllowed past a cap.
Result<std::unique_ptr<DeviceCopier>> MakeDeviceCopier(const void* first, StagingCopy how,
                                                       const std::string& peer);

// Tests: replaces what ProcessDeviceStaging() returns (nullptr: none) for
// agents created from now on. `s` must outlive them.
void SetDeviceStagingForTest(DeviceStaging* s);

}  // namespace kvlane::core
