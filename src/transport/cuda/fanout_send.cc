#include "transport/cuda/fanout_send.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>

namespace kvlane::core {
namespace {

struct Outgoing {
  std::unique_lock<std::mutex> lock;
  size_t at = 0;  // bytes sent
  bool failed = false;
};

// While some target's mutex is held by its own sender, poll wakes this often
// to try it again (a revocation is rare; its holder's send is bounded).
constexpr int kLockRetryMs = 1;

}  // namespace

std::vector<bool> FanoutSend(std::span<const FanoutTarget> to, std::string_view bytes,
                             Deadline by) {
  std::vector<Outgoing> out(to.size());
  std::vector<pollfd> ready;
  std::vector<size_t> which;
  for (;;) {
    ready.clear();
    which.clear();
    bool lock_busy = false;
    for (size_t i = 0; i < to.size(); ++i) {
      Outgoing& o = out[i];
      if (o.failed || o.at == bytes.size()) continue;
      if (!o.lock.owns_lock()) {
        o.lock = std::unique_lock(*to[i].write_mu, std::try_to_lock);
        if (!o.lock.owns_lock()) {
          lock_busy = true;
          continue;
        }
      }
      ready.push_back({to[i].fd, POLLOUT, 0});
      which.push_back(i);
    }
    if (ready.empty() && !lock_busy) break;  // every target done or failed
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(by - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    const int wait = lock_busy ? kLockRetryMs : static_cast<int>(std::min<int64_t>(left, INT_MAX));
    const int rc = poll(ready.data(), ready.size(), wait);
    if (rc < 0 && errno != EINTR) break;
    for (size_t k = 0; rc > 0 && k < ready.size(); ++k) {
      if (ready[k].revents == 0) continue;
      Outgoing& o = out[which[k]];
      const ssize_t n =
          send(ready[k].fd, bytes.data() + o.at, bytes.size() - o.at, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        o.at += static_cast<size_t>(n);
        if (o.at == bytes.size()) o.lock.unlock();  // its own replies may go again at once
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        o.failed = true;  // hung up or reset: POLLERR/POLLHUP land here too
    }
  }
  std::vector<bool> whole(to.size());
  for (size_t i = 0; i < to.size(); ++i) {
    whole[i] = !out[i].failed && out[i].at == bytes.size();
    // Cut before its lock goes: no reply of its own may follow a part of the message.
    if (!whole[i] && out[i].lock.owns_lock()) shutdown(to[i].fd, SHUT_RDWR);
  }
  return whole;
}

}  // namespace kvlane::core
