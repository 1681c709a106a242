// NotifQueue: the notifications an agent received and the application has not
// taken yet (Agent::TakeNotifications). Bounded: remote peers fill it, so a peer
// that floods an application that does not drain would otherwise grow it
// without limit. A notification that does not fit is refused (the sender's
// transfer or SendNotification ends with kNotAllowed) and nothing is dropped
// silently.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/peer_code.h"
#include "kvlane/status.h"
#include "kvlane/transfer.h"

namespace kvlane::core {

class NotifQueue {
 public:
  // Bytes charged per notification on top of its payload and sender name.
  static constexpr uint64_t kOverheadBytes = 64;

  explicit NotifQueue(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Queues `n`, or refuses it when the queue would hold more than max_bytes.
  Status Push(Notification n) {
    const uint64_t cost = Cost(n);
    std::lock_guard lock(mu_);
    if (held_ + cost > max_bytes_)
      return Status::NotAllowed("notification refused: the receiving application holds " +
                                std::to_string(held_) + " bytes of notifications it has not taken "
                                "(AgentOptions.max_notification_bytes = " + std::to_string(max_bytes_) + ")");
    held_ += cost;
    items_.push_back(std::move(n));
    return Status::Ok();
  }

  std::vector<Notification> TakeAll() {
    std::lock_guard lock(mu_);
    held_ = 0;
    return std::exchange(items_, {});
  }

 private:
  static uint64_t Cost(const Notification& n) { return n.bytes.size() + n.peer.size() + kOverheadBytes; }

  const uint64_t max_bytes_;
  std::mutex mu_;
  uint64_t held_ = 0;                // GUARDED_BY(mu_)
  std::vector<Notification> items_;  // GUARDED_BY(mu_)
};

// The sender's status for a notification its peer refused with code `raw` (as
// the peer's reply carried it; an unknown code reads as kBackend).
inline Status RefusedNotification(int32_t raw) {
  const Code c = PeerErrorCode(raw).value_or(Code::kBackend);
  return Status(c, std::string("peer refused the notification (") + CodeName(c) +
                       (c == Code::kNotAllowed ? ": its application holds too many untaken notifications)" : ")"));
}

}  // namespace kvlane::core
