// Helpers shared by the engine tests: agent pairs on a chosen transport, byte
// patterns that mix a seed with the offset, and fault injection (a stalled
// target, a latched channel).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvlane/kvlane.h"

namespace kvlane::test {

// Options for an agent that may use only `transport`.
AgentOptions OptionsFor(const std::string& name, const std::string& transport);

// Two agents in this process that loaded each other's metadata.
struct Pair {
  std::unique_ptr<Agent> a, b;
};

// Buffers a test registers with its agents. A fixture declares its Buffers
// before its Pair, so that the buffers outlive the agents: a target's server
// may still be returning from the send of a READ reply that the initiator
// already saw (ASan checks the sent bytes after the call returns).
class Buffers {
 public:
  std::vector<uint8_t>& Make(size_t n, uint8_t fill = 0) { return bufs_.emplace_back(n, fill); }

 private:
  std::deque<std::vector<uint8_t>> bufs_;
};
Pair MakePair(const std::string& transport, AgentOptions base = {});

// Loads `to`'s current metadata into `from` (call again after registering).
void Connect(Agent& from, Agent& to);

// One local range paired with one remote range of `n` bytes, prepared and made
// into a transfer in one step.
Result<XferHandle> MakeSimple(Agent& a, const std::string& peer, Op op, const void* local,
                              const void* remote, uint64_t n, std::string_view notif = {},
                              XferOptions xo = {});
// Posts and waits (10 s); returns the terminal status (or the Post error).
Status PostAndWait(Agent& a, XferHandle* h);

// Deterministic bytes for (seed, offset).
// This process's resident set size in bytes (/proc/self/statm).
uint64_t RssBytes();
// CPU time this process has used so far, all threads.
std::chrono::nanoseconds ProcessCpuTime();
// Under ASan/TSan the allocators keep freed memory (quarantine, shadow): RSS
// bounds do not describe kvlane there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

uint8_t PatternByte(uint64_t seed, uint64_t offset);
void Fill(std::vector<uint8_t>& buf, uint64_t seed);
void Fill(uint8_t* p, uint64_t n, uint64_t seed, uint64_t base_offset = 0);
// Index of the first byte that differs from the pattern, or -1.
int64_t FirstMismatch(const uint8_t* p, uint64_t n, uint64_t seed, uint64_t base_offset = 0);
// Index of the first byte that is not `value`, or -1.
int64_t FirstNot(const uint8_t* p, uint64_t n, uint8_t value);

// Stalls every remote access to `target` (local, shm and tcp all take the
// target registry's shared lock per access) until Release(). A helper thread
// owns the exclusive lock, so Release() may come from any thread. Do not call
// `target`'s registry users (RegisterMemory, PrepareLocal, ExportMetadata)
// while stalled.
class RemoteStall {
 public:
  explicit RemoteStall(Agent& target);
  ~RemoteStall() { Release(); }
  void Release();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false, release_ = false;
  std::thread thread_;
};

// Latches `s` on a's channel to `peer` (connecting first), as a failing lane would.
Status LatchPeer(Agent& a, const std::string& peer, const Status& s);

// Polls TakeNotifications() until `n` notifications arrived or `timeout` passed.
std::vector<Notification> TakeAtLeast(Agent& agent, size_t n, std::chrono::milliseconds timeout);

// A region of `bytes` bytes with `guard` sentinel bytes on each side; only the
// middle is meant to be registered.
struct Guarded {
  Guarded(uint64_t bytes, uint64_t guard, uint8_t sentinel);
  uint8_t* data() { return buf.data() + guard; }
  bool GuardsIntact() const;
  std::vector<uint8_t> buf;
  uint64_t bytes, guard;
  uint8_t sentinel;
};

}  // namespace kvlane::test
