#include "scripted_target.h"

#include <sys/socket.h>

#include <utility>
#include <vector>

#include "test_util.h"

namespace kvlane::test {

ScriptedTarget::ScriptedTarget(Answer answer, std::string name)
    : answer_(std::move(answer)), name_(std::move(name)) {}

std::string ScriptedTarget::Blob() const {
  return id_.Blob(name_, listener_.port(),
                  {{0x54, 1ull << 40, 1ull << 30, 1, MemoryKind::kHost, 0}});
}

void ScriptedTarget::Release() {
  listener_.Stop();
  stop_ = true;
  std::lock_guard lock(mu_);
  for (core::Fd& c : conns_) shutdown(c.get(), SHUT_RDWR);
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void ScriptedTarget::Serve(core::Fd c) {
  if (!AcceptAnyHello(c.get(), id_.agent_id, id_.secret)) return;
  std::lock_guard lock(mu_);
  if (answer_) threads_.emplace_back([this, fd = c.get()] { answer_(fd, stop_); });
  conns_.push_back(std::move(c));
}

bool ReadFrame(int fd, core::FrameHeader* h) {
  if (!core::RecvAll(fd, h, sizeof(*h)).ok()) return false;
  std::vector<core::WireSeg> segs(h->nseg);
  if (!core::RecvAll(fd, segs.data(), segs.size() * sizeof(core::WireSeg)).ok()) return false;
  const bool read = h->type == static_cast<uint8_t>(core::FrameType::kRead);
  return read || core::Discard(fd, h->bytes).ok();
}

std::string ReplyBytes(uint64_t ticket, uint64_t bytes) {
  const core::ReplyHeader r{ticket, 0, 0, bytes};
  return std::string(reinterpret_cast<const char*>(&r), sizeof(r));
}

AgentOptions OneLaneTcp(std::chrono::milliseconds io_timeout) {
  AgentOptions o = OptionsFor("a", "tcp");
  o.io_timeout = io_timeout;
  o.lanes_per_peer = 1;
  return o;
}

}  // namespace kvlane::test
