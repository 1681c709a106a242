#include "raw_peer.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>

#include "core/random.h"
#include "test_util.h"
#include "transport/stream/hello_mac.h"

namespace kvlane::test {

using namespace std::chrono_literals;

TargetInfo Inspect(const std::string& blob) {
  TargetInfo t;
  auto m = core::DecodeMeta(blob);
  if (!m.ok()) return t;
  t.meta = std::move(m).value();
  if (!t.meta.pieces.empty()) {
    t.key = t.meta.pieces[0].key;
    t.base = t.meta.pieces[0].base;
    t.len = t.meta.pieces[0].len;
  }
  return t;
}

std::optional<RawPeer> RawPeer::Connect(const std::string& transport, const core::AgentMeta& meta) {
  auto fd = transport == "shm" ? core::ConnectUnix(meta.shm_socket, 2s)
                               : core::ConnectTcp(meta.tcp_host, meta.tcp_port, 2s);
  if (!fd.ok()) return std::nullopt;
  return RawPeer(std::move(fd).value());
}

std::optional<core::ChallengeFrame> RawPeer::ReadChallenge(std::chrono::milliseconds timeout) {
  if (!core::WaitReadable(fd_.get(), timeout).ok()) return std::nullopt;
  core::ChallengeFrame c{};
  if (!core::RecvAll(fd_.get(), &c, sizeof(c)).ok()) return std::nullopt;
  EXPECT_EQ(c.magic, core::kChallengeMagic);
  EXPECT_EQ(c.version, core::kWireVersion);
  return c;
}

std::optional<core::StreamHelloReply> RawPeer::ReadHelloReply() {
  if (!core::WaitReadable(fd_.get(), 5000ms).ok()) return std::nullopt;
  core::StreamHelloReply r{};
  if (!core::RecvAll(fd_.get(), &r, sizeof(r)).ok()) return std::nullopt;
  last_refusal_ = r.refusal;
  return r;
}

std::optional<int32_t> RawPeer::Hello(uint64_t target_id, const core::Secret& secret, uint16_t version,
                                      uint32_t magic, const std::string& name) {
  auto c = ReadChallenge();
  if (!c) return std::nullopt;
  core::StreamHello h{};
  h.magic = magic;
  h.version = version;
  h.role = static_cast<uint8_t>(core::ConnRole::kLane);
  h.name_len = static_cast<uint8_t>(name.size());
  h.target_id = target_id;
  core::RandomBytes(h.nonce.data(), h.nonce.size());
  h.proof = core::HelloProof(secret, c->nonce, h.nonce, target_id, version, name);
  last_hello_.assign(reinterpret_cast<const char*>(&h), sizeof(h));
  last_hello_ += name;
  if (!Send(last_hello_.data(), last_hello_.size())) return std::nullopt;
  auto r = ReadHelloReply();
  if (!r) return std::nullopt;
  if (r->status == 0) {
    EXPECT_TRUE(core::MacEquals(r->proof, core::ReadyProof(secret, h.nonce, c->nonce, target_id)))
        << "the target accepted us without proving it holds the secret";
  }
  return r->status;
}

std::optional<int32_t> RawPeer::SendHello(const std::string& hello) {
  if (!ReadChallenge() || !Send(hello.data(), hello.size())) return std::nullopt;
  auto r = ReadHelloReply();
  if (!r) return std::nullopt;
  return r->status;
}

bool RawPeer::Send(const void* p, size_t n) { return core::SendAll(fd_.get(), p, n).ok(); }

std::optional<int32_t> RawPeer::Write(const std::vector<core::WireSeg>& segs, uint64_t bytes,
                                      bool cma) {
  const std::string payload = cma ? std::string() : std::string(bytes, '\x5a');
  if (!SendFrame(core::FrameType::kWrite, 0, segs, bytes, payload)) return std::nullopt;
  auto r = ReadReply();
  if (!r) return std::nullopt;
  return r->status;
}

bool RawPeer::SendFrame(core::FrameType type, uint64_t ticket, const std::vector<core::WireSeg>& segs,
                        uint64_t bytes, const std::string& payload) {
  core::FrameHeader h{};
  h.type = static_cast<uint8_t>(type);
  h.nseg = static_cast<uint32_t>(segs.size());
  h.ticket = ticket;
  h.bytes = bytes;
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(reinterpret_cast<const char*>(segs.data()), segs.size() * sizeof(core::WireSeg));
  out += payload;
  return Send(out.data(), out.size());
}

std::optional<core::ReplyHeader> RawPeer::ReadReply(std::chrono::milliseconds timeout) {
  if (!core::WaitReadable(fd_.get(), timeout).ok()) return std::nullopt;
  core::ReplyHeader r{};
  if (!core::RecvAll(fd_.get(), &r, sizeof(r)).ok()) return std::nullopt;
  return r;
}

bool RawPeer::ReadPayload(void* p, size_t n) { return core::RecvAll(fd_.get(), p, n).ok(); }

bool RawPeer::ClosedWithin(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  char sink[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !core::WaitReadable(fd_.get(), left).ok()) return false;
    ssize_t n = recv(fd_.get(), sink, sizeof(sink), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

GuardedBuffer::GuardedBuffer(uint64_t body, uint64_t guard, uint64_t seed)
    : body_(body), guard_(guard), seed_(seed), buf_(body + 2 * guard) {
  Fill(buf_, seed);
}

bool GuardedBuffer::GuardsIntact() const {
  return FirstMismatch(buf_.data(), guard_, seed_, 0) == -1 &&
         FirstMismatch(buf_.data() + guard_ + body_, guard_, seed_, guard_ + body_) == -1;
}

bool GuardedBuffer::BodyIntact() const { return FirstMismatch(buf_.data() + guard_, body_, seed_, guard_) == -1; }

void GuardedBuffer::ResetBody() {
  for (uint64_t i = 0; i < body_; ++i) buf_[guard_ + i] = PatternByte(seed_, guard_ + i);
}

FakeTargetId::FakeTargetId() : agent_id(core::RandomU64() | 1) {
  core::RandomBytes(secret.data(), secret.size());
}

std::string FakeTargetId::Blob(const std::string& name, uint16_t port,
                               std::vector<core::Piece> pieces) const {
  core::AgentMeta m;
  m.name = name;
  m.agent_id = agent_id;
  m.secret = secret;
  m.tcp_host = "127.0.0.1";
  m.tcp_port = port;
  m.pieces = std::move(pieces);
  return core::EncodeMeta(m);
}

bool AcceptAnyHello(int fd, uint64_t agent_id, const core::Secret& secret) {
  core::ChallengeFrame c{core::kChallengeMagic, core::kWireVersion, 0, {}};
  core::RandomBytes(c.nonce.data(), c.nonce.size());
  core::StreamHello h{};
  std::string name(255, '\0');
  if (!core::SendAll(fd, &c, sizeof(c)).ok() || !core::RecvAll(fd, &h, sizeof(h)).ok() ||
      !core::RecvAll(fd, name.data(), h.name_len).ok())
    return false;
  core::StreamHelloReply ok{0, 0, core::ReadyProof(secret, h.nonce, c.nonce, agent_id)};
  return core::SendAll(fd, &ok, sizeof(ok)).ok();
}

}  // namespace kvlane::test
