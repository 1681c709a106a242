// ScriptedTarget: a fake tcp target that passes any initiator's handshake and
// then answers each connection with a script, to play a target that answers the
// way a kvlane target never would (fault_test, hostile_target_test,
// slow_reader_test). Also what scripts read and send frames with, and the
// one-lane initiator they are tested with.
// Thread-safety: construct, Blob and Release from the test's thread; each
// connection's script runs on a thread of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "kvlane/options.h"
#include "loopback_listener.h"
#include "raw_peer.h"
#include "transport/stream/socket.h"
#include "transport/stream/wire.h"

namespace kvlane::test {

// A tcp "peer" that accepts every Hello, then runs `answer` on each connection,
// on a thread of its own, until the connection ends or Release. It owns the
// connections: they stay open until Release.
class ScriptedTarget {
 public:
  // answer(fd, stop): serves the connection; returns once it is done or `stop` is set.
  using Answer = std::function<void(int fd, const std::atomic<bool>& stop)>;
  // An empty `answer` reads nothing after the handshake (a deaf target): no
  // thread, the connection only held. `name` is the agent name in Blob().
  explicit ScriptedTarget(Answer answer, std::string name = "target");
  ~ScriptedTarget() { Release(); }
  ScriptedTarget(const ScriptedTarget&) = delete;
  ScriptedTarget& operator=(const ScriptedTarget&) = delete;

  // Metadata naming this endpoint name(), with one large fake region at 2^40.
  std::string Blob() const;
  const std::string& name() const { return name_; }
  // Stops every answer, closes every connection (a blocked initiator then sees
  // EOF) and joins. Idempotent.
  void Release();

 private:
  void Serve(core::Fd c);

  const Answer answer_;
  const std::string name_;
  const FakeTargetId id_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::list<core::Fd> conns_;       // GUARDED_BY(mu_)
  std::list<std::thread> threads_;  // GUARDED_BY(mu_)
  LoopbackListener listener_{[this](core::Fd c) { Serve(std::move(c)); }};
};

// Reads one frame: header, segments and (WRITE, notification) its payload.
// False when the connection broke first.
bool ReadFrame(int fd, core::FrameHeader* h);

// A successful reply header for `ticket` announcing `bytes` of payload, as the
// bytes a script sends.
std::string ReplyBytes(uint64_t ticket, uint64_t bytes);

// Agent "a" on tcp with one lane (every post meets the fake target's single
// connection behaviour) and `io_timeout`.
AgentOptions OneLaneTcp(std::chrono::milliseconds io_timeout);

}  // namespace kvlane::test
