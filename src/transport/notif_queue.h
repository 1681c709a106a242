// NotifQueue: the notifications an agent received and the application has not
// taken yet (Agent::TakeNotifications). Bounded twice: remote peers fill it, so
// a peer that floods an application that does not drain would otherwise grow it
// without limit (max_bytes, for all peers together), and would crowd every other
// peer out until the application drains (max_peer_bytes, for each peer). A peer
// is the name a notification comes with (Notification::peer: what the sender's
// handshake announced), so the share binds a peer that keeps its name, not one
// that takes a new name per notification (docs/SECURITY.md). A notification that
// does not fit is refused (the sender's transfer or SendNotification ends with
// kNotAllowed) and nothing is dropped silently. TakeAll frees both accounts.
// The charges cover the queue's own heap too (kOverheadBytes, kNameOverheadBytes,
// and the heap blocks of payloads and names: StringCost): it holds at most what it
// charged plus 608 bytes (64-bit libstdc++ and glibc).
//
// Thread-safety: thread-safe.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <deque>
#include <iterator>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/peer_code.h"
#include "kvlane/status.h"
#include "kvlane/transfer.h"
#include "transport/stream/wire.h"

namespace kvlane::core {

// What NotifQueue charges for a payload or name of `capacity` bytes held on the
// heap: its block, n = capacity + 1 bytes (the terminating NUL) and a 16-byte
// header, rounded up to 16. glibc's block for n bytes is n and its 8-byte header
// rounded up to 16, at least 32 (64-bit): never more, for the n > 16 of a string
// past its own buffer. A 16-byte payload: 48 (glibc's block: 32).
constexpr uint64_t HeapStringCost(uint64_t capacity) { return (capacity + 1 + 15) / 16 * 16 + 16; }

class NotifQueue {
 public:
  // Bytes charged per notification on top of its payload and sender name: its
  // slot in items_. With 64-bit libstdc++ and glibc a slot is sizeof(Notification)
  // = 64 bytes in a chunk of 8 (a 512-byte block, 528 with malloc's header: 66 a
  // slot), plus 8-byte map pointers: up to 3 per chunk after the map doubles, 4.5
  // while the old map is still held (under 5 bytes a slot). Not charged: an empty
  // queue's first chunk and map (608 bytes, which also cover the last chunk's
  // unfilled slots). A payload or name too long for std::string's own buffer
  // (over 15 bytes) is charged its heap block instead of its length (StringCost).
  static constexpr uint64_t kOverheadBytes = 72;
  static_assert(sizeof(Notification) + 8 <= kOverheadBytes, "revisit the slot's cost");
  // Bytes charged once per sender name while it has notifications queued, on top
  // of the name's length (NameCost): its node in held_by_. With 64-bit libstdc++
  // that is a 56-byte node in a 64-byte malloc chunk, 8 to 16 bytes of bucket
  // array, and the malloc header and rounding of the key's own heap copy (up to
  // 24 bytes), rounded up. Without it, a peer taking a new name per notification
  // would grow the map past max_bytes.
  static constexpr uint64_t kNameOverheadBytes = 128;
  // What a payload or sender name is charged: its length while it fits the
  // string's own buffer (in the slot, kOverheadBytes; 15 bytes with libstdc++),
  // else its heap block (HeapStringCost of its capacity).
  static uint64_t StringCost(const std::string& s) {
    return s.capacity() > std::string().capacity() ? HeapStringCost(s.capacity()) : s.size();
  }
  // What `n` is charged while queued (the first of its sender's name also pays NameCost).
  static uint64_t Cost(const Notification& n) {
    return StringCost(n.bytes) + StringCost(n.peer) + kOverheadBytes;
  }
  // What a sender name is charged once while it has notifications queued.
  static uint64_t NameCost(const std::string& peer) { return kNameOverheadBytes + peer.size(); }

  // What the largest notification costs: the largest payload from the longest
  // name, the first from that name (66,295 bytes).
  static constexpr uint64_t kLargestCost = HeapStringCost(kMaxNotifyBytes) +
                                           HeapStringCost(kMaxPeerName) + kOverheadBytes +
                                           kNameOverheadBytes + kMaxPeerName;
  // What the smallest costs: no payload from a 1-byte name, the first from that
  // name (both in their strings' own buffers). A share below it admits nothing.
  static constexpr uint64_t kSmallestCost = 1 + kOverheadBytes + kNameOverheadBytes + 1;
  static_assert(kLargestCost == 66295 && kSmallestCost == 202, "update the documented costs");

  // The per-peer share for AgentOptions::max_notification_bytes_per_peer = 0: a
  // quarter of `max_bytes`, but at least what the largest notification costs
  // (or all of `max_bytes`), so that one always fits an empty queue.
  static uint64_t DefaultShare(uint64_t max_bytes) {
    return std::max(max_bytes / 4, std::min(max_bytes, kLargestCost));
  }

  // REQUIRES: 0 < max_peer_bytes <= max_bytes (AgentOptions::Validate).
  NotifQueue(uint64_t max_bytes, uint64_t max_peer_bytes)
      : max_bytes_(max_bytes), max_peer_bytes_(max_peer_bytes) {
    assert(max_peer_bytes > 0 && max_peer_bytes <= max_bytes);
  }

  // Queues `n`, or refuses it (NotAllowed, naming the limit) when its sender
  // would hold more than max_peer_bytes, or the queue more than max_bytes. The
  // first notification of a name queued also pays for the name (NameCost).
  // Never throws: out of memory is kBackend, with nothing queued or charged
  // (a server thread calls it for a remote peer).
  Status Push(Notification n) noexcept {
    try {
      return TryPush(std::move(n));
    } catch (const std::bad_alloc&) {
      return Status::Backend("out of memory");  // short: fits the string's own buffer
    }
  }

  // Every notification queued, oldest first. Every name's queue is empty after
  // it, so every node of held_by_ goes, and with them their charges. Never
  // throws: out of memory for the vector (or for the empty queue that replaces
  // this one), it returns none and takes none; they stay queued and charged for a
  // later call. While it runs the slots exist twice (64 bytes a notification in
  // the vector); payloads and names are moved, not copied.
  std::vector<Notification> TakeAll() noexcept {
    try {
      if (Empty()) return {};          // the common poll allocates nothing
      std::deque<Notification> taken;  // libstdc++ allocates even an empty deque
      std::vector<Notification> out;
      {
        std::lock_guard lock(mu_);
        out.reserve(items_.size());  // may throw: nothing taken yet
        items_.swap(taken);
        held_ = 0;
        held_by_.clear();
      }
      std::move(taken.begin(), taken.end(), std::back_inserter(out));  // room reserved
      return out;
    } catch (const std::bad_alloc&) {
      return {};
    }
  }

 private:
  bool Empty() {
    std::lock_guard lock(mu_);
    return items_.empty();
  }

  // Push, but may throw std::bad_alloc: a throw leaves the queue as it was. The
  // allocations are the name's node, then room in items_ (a chunk, perhaps a
  // larger map); if the latter throws, a node just made is erased again.
  Status TryPush(Notification n) {
    std::lock_guard lock(mu_);
    auto mine = held_by_.find(n.peer);
    const bool fresh = mine == held_by_.end();
    const uint64_t cost = Cost(n) + (fresh ? NameCost(n.peer) : 0);
    const uint64_t peer_held = fresh ? 0 : mine->second;
    if (peer_held + cost > max_peer_bytes_)
      // The per-peer limit is often not set by hand: say where its value came from.
      return Refused(peer_held, "from peer '" + n.peer + "'", "max_notification_bytes_per_peer",
                     max_peer_bytes_,
                     "; when left 0, a quarter of max_notification_bytes, at least one largest "
                     "notification");
    if (held_ + cost > max_bytes_)
      return Refused(held_, "in all", "max_notification_bytes", max_bytes_, "");
    if (fresh) mine = held_by_.emplace(n.peer, 0).first;  // may throw; then nothing changed
    try {
      items_.push_back(std::move(n));  // may throw; then items_ is as it was
    } catch (...) {
      if (fresh) held_by_.erase(mine);
      throw;
    }
    held_ += cost;
    mine->second += cost;
    return Status::Ok();
  }

  // `note` follows the limit's value, inside its parentheses.
  static Status Refused(uint64_t held, const std::string& whose, const char* field, uint64_t limit,
                        const char* note) {
    return Status::NotAllowed("notification refused: the receiving application holds " +
                              std::to_string(held) + " bytes of notifications " + whose +
                              " it has not taken (AgentOptions." + field + " = " +
                              std::to_string(limit) + note + ")");
  }

  const uint64_t max_bytes_;
  const uint64_t max_peer_bytes_;
  std::mutex mu_;
  uint64_t held_ = 0;                                  // GUARDED_BY(mu_)
  // Bytes each name holds, its NameCost included; only names with notifications
  // queued have a node. GUARDED_BY(mu_)
  std::unordered_map<std::string, uint64_t> held_by_;
  // Oldest first. A deque, not a vector: its spare room is at most a chunk and
  // its map's, not as much again as it holds. GUARDED_BY(mu_)
  std::deque<Notification> items_;
};

// The sender's status for a notification its peer refused with code `raw` (as
// the peer's reply carried it; an unknown code reads as kBackend).
inline Status RefusedNotification(int32_t raw) {
  const Code c = PeerErrorCode(raw).value_or(Code::kBackend);
  return Status(c, std::string("peer refused the notification (") + CodeName(c) +
                       (c == Code::kNotAllowed
                            ? ": its application holds too many untaken notifications, from "
                              "this agent (AgentOptions.max_notification_bytes_per_peer "
                              "there) or from all its peers (max_notification_bytes))"
                            : ")"));
}

}  // namespace kvlane::core
