// The control plane between lanebench's processes, kept out of the timed path:
// files in the run directory for the rendezvous (metadata blobs, buffer
// addresses), and kvlane notifications for the per-iteration handshakes.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <string>

#include "kvlane/agent.h"

namespace lanebench {

// Writes `bytes` to `path` through a temporary file and a rename. On failure
// `path` is unchanged and the temporary file is removed.
kvlane::Status WriteFileAtomic(const std::string& path, const std::string& bytes);
// Whether WriteFileAtomic(path, ...) can succeed now: creates and removes its
// temporary file; `path` itself is neither created nor changed.
kvlane::Status CheckWritable(const std::string& path);
// Waits until `path` exists, then reads it whole; kTimeout once `deadline` passes.
kvlane::Result<std::string> AwaitFile(const std::string& path,
                                      std::chrono::steady_clock::time_point deadline);

// Text messages to and from peers over kvlane notifications. One thread at a time.
class ControlLink {
 public:
  explicit ControlLink(kvlane::Agent* agent) : agent_(agent) {}
  kvlane::Status Send(const std::string& peer, const std::string& message);
  // The next message from `peer`, waiting until `deadline` at most (kTimeout
  // then; a worker passes its whole run's deadline). Messages of other
  // peers are kept for their Await: from at most kMaxPeers names (others are
  // dropped), at most kMaxQueued each (more is kInvalidArgument: a flood).
  kvlane::Result<std::string> Await(const std::string& peer,
                                    std::chrono::steady_clock::time_point deadline);

  static constexpr size_t kMaxPeers = 64;
  static constexpr size_t kMaxQueued = 1024;

 private:
  kvlane::Agent* agent_;
  std::map<std::string, std::deque<std::string>> inbox_;
};

}  // namespace lanebench
