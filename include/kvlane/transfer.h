// Transfer-level types: operations, prepared lists, handles, notifications.
#pragma once

#include <cstdint>
#include <string>

namespace kvlane {

enum class Op : uint8_t {
  kRead = 0,   // pull remote bytes into local memory
  kWrite = 1,  // push local bytes into remote memory
};

const char* OpName(Op op);

// A descriptor list resolved once by Agent::PrepareLocal / PrepareRemote.
struct PreparedId {
  uint32_t value = 0;
  bool valid() const { return value != 0; }
};

// A transfer handle: names one request slot and the generation of its latest
// post. A handle is used by one thread at a time; copies of it read as stale
// once the slot is posted again or released. Copies posted or released on two
// threads at once are refused (kNotAllowed) rather than raced; a Cancel of a
// copy, though, may cancel the post another thread just made. Generations are
// 32 bits: a copy kept while its slot is posted 2^32 more times may read as
// current again.
struct XferHandle {
  uint32_t slot = UINT32_MAX;
  uint32_t gen = 0;
  bool valid() const { return slot != UINT32_MAX; }
};

// The most bytes one transfer moves (1 TiB) and the most descriptor pairs it
// pairs: MakeTransfer refuses more (kInvalidArgument); split such a transfer.
inline constexpr uint64_t kMaxTransferBytes = uint64_t{1} << 40;
inline constexpr uint64_t kMaxTransferPairs = UINT32_MAX;

// Per-transfer choices made at MakeTransfer time.
struct XferOptions {
  // -1: the engine picks (stripes bulk, least-loaded lane for small); else every
  // post goes to lane `lane`, 0 .. the channel's lanes (lanes_per_peer) - 1:
  // MakeTransfer refuses another value (kInvalidArgument).
  int lane = -1;
  bool stripe = true;      // allow striping chunks over every lane of the peer
};

// How MakeTransfer planned a transfer (Agent::Describe): what a post moves.
struct XferInfo {
  uint64_t bytes = 0;     // payload of one post
  uint32_t pairs = 0;     // descriptor pairs given to MakeTransfer
  uint32_t segments = 0;  // contiguous ranges after cutting at pieces and merging
  uint32_t chunks = 0;    // units the lanes move (at most chunk_bytes each)
};

// A notification received from a peer. Delivered only after the data of the
// transfer that carried it is visible in this process.
struct Notification {
  std::string peer;   // the sender agent's name
  std::string bytes;  // opaque payload
};

}  // namespace kvlane
