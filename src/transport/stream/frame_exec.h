// Executes one initiator frame on the target side: validates every segment
// against the live registry, moves the bytes (inline or CMA), writes the reply.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <memory>
#include <string>
#include <vector>

#include "core/device_copier.h"
#include "core/registry.h"
#include "transport/stream/server.h"
#include "transport/stream/wire.h"

namespace kvlane::core {

class FrameExecutor {
 public:
  FrameExecutor(AgentContext* ctx, PayloadMode mode, int fd, pid_t peer_pid, std::string peer_name)
      : ctx_(ctx), mode_(mode), fd_(fd), peer_pid_(peer_pid), peer_name_(std::move(peer_name)) {
    segs_.reserve(kMaxWireSegs);
    local_.reserve(kMaxWireSegs + 1);
    remote_.reserve(kMaxWireSegs);
  }

  // Serves frames until the connection ends. Returns why it ended.
  Status Run();

 private:
  Status ReadSegs(const FrameHeader& h);
  // REQUIRES: registry lock held. Fills local_ and device_ (the frame's
  // memory is device memory: tcp stages it, shm cannot reach it). `op`: what
  // the frame does to the target's memory (kWrite: stores into it).
  Status Validate(Op op);
  Status Admit(Op op, Registry::SharedLock& lock);  // Validate (+ copier)
  Status WriteStaged(const FrameHeader& h, Registry::SharedLock lock);
  Status ReadStaged(const FrameHeader& h, Registry::SharedLock lock);
  Status Write(const FrameHeader& h);
  Status Read(const FrameHeader& h);
  Status Notify(const FrameHeader& h);
  Status Reply(uint64_t ticket, const Status& s);
  // shm: copies the frame's ranges between the initiator's process and ours
  // (into_target: a WRITE). Refuses to copy once the frame's deadline passed
  // (kTimeout) or the initiator shut its end (kCanceled): it may have ended the
  // request, and the memory may be another's by now.
  Status CmaCopy(bool into_target);

  AgentContext* ctx_;
  const PayloadMode mode_;
  const int fd_;
  const pid_t peer_pid_;
  const std::string peer_name_;
  std::vector<WireSeg> segs_;
  std::vector<iovec> local_;   // target memory
  std::vector<iovec> remote_;  // initiator memory (CMA)
  bool device_ = false;
  std::unique_ptr<DeviceCopier> copier_;
  // The frame being served ends by then: io_timeout after its first byte
  // (socket.h: plus at most one socket timeout for the call under way). It may
  // hold the registry lock, which DeregisterMemory waits for.
  Deadline by_ = kNoDeadline;
};

}  // namespace kvlane::core
