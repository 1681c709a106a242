#include "control.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace lanebench {
namespace {

using Clock = std::chrono::steady_clock;

// Sleeps a little longer each round (10 us up to 500 us): cheap for the CPUs
// that the lanes share, quick enough for handshakes outside the timed path.
void Backoff(std::chrono::microseconds* pause) {
  std::this_thread::sleep_for(*pause);
  *pause = std::min(*pause * 2, std::chrono::microseconds(500));
}

// The temporary file beside `path` that this process writes first: named by
// the process, so that two runs writing one path do not share it, and a user's
// own "<path>.tmp" is never touched.
std::string TempBeside(const std::string& path) {
  return path + "." + std::to_string(getpid()) + ".tmp";
}

}  // namespace

kvlane::Status WriteFileAtomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = TempBeside(path);
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();  // the buffer's last bytes are written here: a full disk may fail only now
  if (!out) {
    std::remove(tmp.c_str());  // a partial file is no use to anyone, beside the user's path
    return kvlane::Status::Backend("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return kvlane::Status::Backend("cannot rename " + tmp);
  }
  return kvlane::Status::Ok();
}

kvlane::Status CheckWritable(const std::string& path) {
  std::error_code ec;
  if (path.empty()) return kvlane::Status::InvalidArgument("an empty path");
  if (std::filesystem::is_directory(path, ec))
    return kvlane::Status::InvalidArgument(path + " is a directory");
  const std::string tmp = TempBeside(path);
  if (!std::ofstream(tmp, std::ios::binary | std::ios::trunc))
    return kvlane::Status::Backend("cannot write " + tmp + ": " + std::strerror(errno));
  std::filesystem::remove(tmp, ec);
  return kvlane::Status::Ok();
}

kvlane::Result<std::string> AwaitFile(const std::string& path, Clock::time_point deadline) {
  std::chrono::microseconds pause(10);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream s;
      s << in.rdbuf();
      return s.str();
    }
    if (Clock::now() >= deadline) return kvlane::Status::Timeout("no " + path + " in time");
    Backoff(&pause);
  }
}

kvlane::Status ControlLink::Send(const std::string& peer, const std::string& message) {
  return agent_->SendNotification(peer, message);
}

kvlane::Result<std::string> ControlLink::Await(const std::string& peer,
                                               Clock::time_point deadline) {
  std::chrono::microseconds pause(10);
  for (;;) {
    for (auto& n : agent_->TakeNotifications()) {
      // A peer answers one message at a time: a queue this long is a flood, and
      // names beyond the group's are dropped (the inbox stays bounded).
      auto it = inbox_.find(n.peer);
      if (it == inbox_.end() && inbox_.size() >= kMaxPeers) continue;
      auto& from = inbox_[n.peer];
      if (from.size() >= kMaxQueued)
        return kvlane::Status::InvalidArgument("more than 1,024 unanswered messages from a peer");
      from.push_back(std::move(n.bytes));
    }
    auto& q = inbox_[peer];
    if (!q.empty()) {
      std::string m = std::move(q.front());
      q.pop_front();
      return m;
    }
    KVLANE_RETURN_IF_ERROR(agent_->PeerError(peer));
    if (Clock::now() >= deadline)
      return kvlane::Status::Timeout("no message from '" + peer + "' in time");
    Backoff(&pause);
  }
}

}  // namespace lanebench
