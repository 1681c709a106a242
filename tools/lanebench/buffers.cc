#include "buffers.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace lanebench {
namespace {

class HostSpace final : public BufferSpace {
 public:
  ~HostSpace() override {
    for (void* p : blocks_) std::free(p);
  }
  kvlane::MemoryKind kind() const override { return kvlane::MemoryKind::kHost; }

  kvlane::Result<uint8_t*> Allocate(uint64_t bytes) override {
    constexpr uint64_t kAlign = 4096;
    void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (p == nullptr) return kvlane::Status::Backend("out of host memory");
    std::memset(p, 0, bytes);
    blocks_.push_back(p);
    return static_cast<uint8_t*>(p);
  }
  kvlane::Status Upload(uint8_t* dst, const uint8_t* host, uint64_t n) override {
    std::memcpy(dst, host, n);
    return kvlane::Status::Ok();
  }
  kvlane::Status Download(uint8_t* host, const uint8_t* src, uint64_t n) override {
    std::memcpy(host, src, n);
    return kvlane::Status::Ok();
  }

 private:
  std::vector<void*> blocks_;
};

}  // namespace

kvlane::Result<std::unique_ptr<BufferSpace>> MakeBufferSpace(const std::string& memory, int role) {
  if (memory == "host") return std::unique_ptr<BufferSpace>(new HostSpace());
#ifdef KVLANE_HAVE_CUDA
  if (memory == "device") return MakeDeviceSpace(role);
#else
  (void)role;
  if (memory == "device")
    return kvlane::Status::NotSupported("lanebench was built without CUDA: no device buffers");
#endif
  return kvlane::Status::InvalidArgument("unknown memory '" + memory + "' (host|device)");
}

}  // namespace lanebench
