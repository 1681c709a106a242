// BufferSpace: where lanebench puts the memory that transfers touch. The seam
// for device memory: every fill and check goes through a host staging copy
// (Upload / Download), so a CUDA space only has to implement these four calls.
//
// Thread-safety: one thread at a time. Buffers are owned by the space and freed
// with it (after the agent that registered them is gone).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvlane/memory.h"
#include "kvlane/status.h"

namespace lanebench {

class BufferSpace {
 public:
  virtual ~BufferSpace() = default;
  virtual kvlane::MemoryKind kind() const = 0;
  virtual int32_t device() const { return 0; }
  // Zero-filled memory of `bytes`, alive until the space is destroyed.
  virtual kvlane::Result<uint8_t*> Allocate(uint64_t bytes) = 0;
  // Copies host bytes into a buffer of this space, and back.
  virtual kvlane::Status Upload(uint8_t* dst, const uint8_t* host, uint64_t n) = 0;
  virtual kvlane::Status Download(uint8_t* host, const uint8_t* src, uint64_t n) = 0;
};

// "host": page-aligned host memory. "device": CUDA device memory (kNotSupported
// when lanebench is built without CUDA or no GPU is visible). `role` 0 is the
// source, 1 a target: with two GPUs they land on different devices.
kvlane::Result<std::unique_ptr<BufferSpace>> MakeBufferSpace(const std::string& memory, int role);

// The CUDA space (cuda_buffers.cc); selects the role's device on this thread.
kvlane::Result<std::unique_ptr<BufferSpace>> MakeDeviceSpace(int role);

}  // namespace lanebench
