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
//
// Thread-safety: thread-safe.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
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

class NotifQueue {
 public:
  // Bytes charged per notification on top of its payload and sender name: its
  // slot in items_ (sizeof(Notification)). The vector's spare capacity, up to as
  // much again (briefly twice while it grows), is not charged (docs/SECURITY.md).
  static constexpr uint64_t kOverheadBytes = 64;
  // Bytes charged once per sender name while it has notifications queued, on top
  // of the name's length (NameCost): its node in held_by_. With 64-bit libstdc++
  // that is a 56-byte node in a 64-byte malloc chunk, 8 to 16 bytes of bucket
  // array, and the malloc header and rounding of the key's own heap copy (up to
  // 24 bytes), rounded up. Without it, a peer taking a new name per notification
  // would grow the map past max_bytes.
  static constexpr uint64_t kNameOverheadBytes = 128;
  // What the largest notification costs: the largest payload from the longest
  // name, the first from that name.
  static constexpr uint64_t kLargestCost =
      kMaxNotifyBytes + kMaxPeerName + kOverheadBytes + kNameOverheadBytes + kMaxPeerName;
  // What the smallest costs: no payload from a 1-byte name, the first from that
  // name. A share below it admits nothing.
  static constexpr uint64_t kSmallestCost = 1 + kOverheadBytes + kNameOverheadBytes + 1;

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
  // it, so every node of held_by_ goes, and with them their charges.
  std::vector<Notification> TakeAll() {
    std::lock_guard lock(mu_);
    held_ = 0;
    held_by_.clear();
    return std::exchange(items_, {});
  }

 private:
  // Push, but may throw std::bad_alloc: every allocation comes before any change
  // (items_ grows first, and a name's node is the only other allocation), so a
  // throw leaves the queue as it was.
  Status TryPush(Notification n) {
    std::lock_guard lock(mu_);
    auto mine = held_by_.find(n.peer);
    const bool fresh = mine == held_by_.end();
    const uint64_t cost = Cost(n) + (fresh ? NameCost(n.peer) : 0);
    const uint64_t peer_held = fresh ? 0 : mine->second;
    if (peer_held + cost > max_peer_bytes_)
      return Refused(peer_held, "from peer '" + n.peer + "'", "max_notification_bytes_per_peer",
                     max_peer_bytes_);
    if (held_ + cost > max_bytes_)
      return Refused(held_, "in all", "max_notification_bytes", max_bytes_);
    if (items_.size() == items_.capacity())  // grows geometrically; may throw: nothing changed
      items_.reserve(std::max<size_t>(16, 2 * items_.capacity()));
    if (fresh) mine = held_by_.emplace(n.peer, 0).first;  // may throw; then nothing changed
    items_.push_back(std::move(n));                       // room reserved: cannot throw
    held_ += cost;
    mine->second += cost;
    return Status::Ok();
  }

  static uint64_t Cost(const Notification& n) { return n.bytes.size() + n.peer.size() + kOverheadBytes; }
  static uint64_t NameCost(const std::string& peer) { return kNameOverheadBytes + peer.size(); }
  static Status Refused(uint64_t held, const std::string& whose, const char* field,
                        uint64_t limit) {
    return Status::NotAllowed("notification refused: the receiving application holds " +
                              std::to_string(held) + " bytes of notifications " + whose +
                              " it has not taken (AgentOptions." + field + " = " +
                              std::to_string(limit) + ")");
  }

  const uint64_t max_bytes_;
  const uint64_t max_peer_bytes_;
  std::mutex mu_;
  uint64_t held_ = 0;                                  // GUARDED_BY(mu_)
  // Bytes each name holds, its NameCost included; only names with notifications
  // queued have a node. GUARDED_BY(mu_)
  std::unordered_map<std::string, uint64_t> held_by_;
  std::vector<Notification> items_;                    // GUARDED_BY(mu_)
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
