#include <atomic>

#include "core/device_copier.h"
#ifdef KVLANE_HAVE_CUDA
#include "transport/cuda/cuda_copier.h"
#endif

namespace kvlane::core {
namespace {

std::atomic<DeviceStaging*> test_staging{nullptr};
std::atomic<bool> test_set{false};

DeviceStaging* Probe() {
#ifdef KVLANE_HAVE_CUDA
  return MakeCudaStaging().release();  // nullptr without a GPU; kept for the process's life
#else
  return nullptr;
#endif
}

}  // namespace

DeviceStaging* ProcessDeviceStaging() {
  if (test_set.load(std::memory_order_acquire)) return test_staging.load(std::memory_order_acquire);
  static DeviceStaging* const probed = Probe();
  return probed;
}

Result<std::unique_ptr<DeviceCopier>> MakeDeviceCopier(const void* first, StagingCopy how,
                                                       const std::string& peer) {
  DeviceStaging* staging = ProcessDeviceStaging();
  if (staging == nullptr)
    return Status::NotSupported("tcp: this process cannot stage device memory (no GPU here)");
  KVLANE_ASSIGN_OR_RETURN(StagingQuota::Ticket ticket, ProcessStagingQuota().Take(peer));
  KVLANE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceCopier> copier, staging->MakeCopier(first, how));
  if (copier == nullptr) return Status::Backend("tcp: the device staging made no copier");
  copier->HoldQuota(std::move(ticket));
  return copier;
}

void SetDeviceStagingForTest(DeviceStaging* s) {
  test_staging.store(s, std::memory_order_release);
  test_set.store(true, std::memory_order_release);
}

}  // namespace kvlane::core
