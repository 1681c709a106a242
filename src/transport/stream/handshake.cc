#include "transport/stream/handshake.h"

#include "core/random.h"
#include "transport/stream/frame_check.h"
#include "transport/stream/hello_mac.h"
#include "transport/stream/socket.h"

namespace kvlane::core {
namespace {

Status SendAll(HelloIo& io, const void* buf, size_t len) {
  iovec v{const_cast<void*>(buf), len};
  return io.Send(&v, 1);
}

// Reads a Hello and the name after it; stops after magic and version when they
// are not ours (an older peer's Hello is shorter: CheckHello refuses it at once).
Status RecvHello(HelloIo& io, StreamHello* h, std::string* name) {
  auto* p = reinterpret_cast<char*>(h);
  KVLANE_RETURN_IF_ERROR(io.Recv(p, kHelloPrefixBytes));
  if (h->magic != kHelloMagic || h->version != kWireVersion) return Status::Ok();
  KVLANE_RETURN_IF_ERROR(io.Recv(p + kHelloPrefixBytes, sizeof(*h) - kHelloPrefixBytes));
  name->resize(h->name_len);
  return io.Recv(name->data(), name->size());
}

Result<ChallengeFrame> RecvChallenge(const AgentMeta& peer, HelloIo& io) {
  const std::string who = "peer '" + peer.name + "'";
  Status s = io.WaitReadable();
  if (s.code() == Code::kTimeout)
    return Status::Timeout(
        who + " accepted the connection but sent no challenge within connect_timeout (a " +
        "stopped or overloaded process, or kvlane older than wire version 2)");
  ChallengeFrame c{};
  if (s.ok()) s = io.Recv(&c, sizeof(c));
  if (IsPeerClosed(s))
    return Status::RemoteDisconnect(
        who + " closed the connection without a challenge (too many connections, " +
        "another uid on shm, or kvlane older than wire version 2)");
  if (s.is_error())  // a reset, a timeout (keepalive, TCP_USER_TIMEOUT): said as such
    return Status(s.code(),
                  "the connection to " + who + " failed before its challenge: " + s.message());
  if (c.magic != kChallengeMagic)
    return Status::Backend("protocol: " + who + " did not open with a kvlane challenge");
  if (c.version != kWireVersion)
    return Status::NotSupported(who + " speaks kvlane wire version " + std::to_string(c.version) +
                                ", this build speaks " + std::to_string(kWireVersion));
  return c;
}

}  // namespace

Result<PeerConnLimit::Slot> AcceptHello(const AgentContext& ctx, HelloIo& io,
                                        PeerConnLimit& limit) {
  ChallengeFrame c{kChallengeMagic, kWireVersion, 0, {}};
  RandomBytes(c.nonce.data(), c.nonce.size());
  KVLANE_RETURN_IF_ERROR(SendAll(io, &c, sizeof(c)));
  StreamHello h{};
  std::string name;
  KVLANE_RETURN_IF_ERROR(RecvHello(io, &h, &name));
  const Status valid = CheckHello(h, name, ctx.agent_id, ctx.secret, c.nonce);
  Result<PeerConnLimit::Slot> slot =
      valid.ok() ? limit.Acquire(name) : Result<PeerConnLimit::Slot>(valid);
  StreamHelloReply reply{static_cast<int32_t>(slot.status().code()), 0, {}};
  if (slot.ok())
    reply.proof = ReadyProof(ctx.secret, h.nonce, c.nonce, ctx.agent_id);
  else if (valid.ok() && slot.status().code() == Code::kNotAllowed)  // not out of memory
    reply.refusal = static_cast<uint32_t>(HelloRefusal::kPeerConnLimit);
  KVLANE_RETURN_IF_ERROR(SendAll(io, &reply, sizeof(reply)));
  return slot;
}

Result<PeerConnLimit::Slot> AcceptHello(const AgentContext& ctx, int fd, PeerConnLimit& limit) {
  DeadlineIo io(fd, DeadlineIn(ctx.options.connect_timeout));
  return AcceptHello(ctx, io, limit);
}

Status SayHello(std::string_view self_name, const AgentMeta& peer, ConnRole role, HelloIo& io) {
  KVLANE_ASSIGN_OR_RETURN(ChallengeFrame c, RecvChallenge(peer, io));
  StreamHello h{};
  h.magic = kHelloMagic;
  h.version = kWireVersion;
  h.role = static_cast<uint8_t>(role);
  h.name_len = static_cast<uint8_t>(self_name.size());
  h.target_id = peer.agent_id;
  RandomBytes(h.nonce.data(), h.nonce.size());
  h.proof = HelloProof(peer.secret, c.nonce, h.nonce, h.target_id, h.version, self_name);
  iovec v[2] = {{&h, sizeof(h)}, {const_cast<char*>(self_name.data()), self_name.size()}};
  KVLANE_RETURN_IF_ERROR(io.Send(v, 2));
  KVLANE_RETURN_IF_ERROR(io.WaitReadable());
  StreamHelloReply r{};
  KVLANE_RETURN_IF_ERROR(io.Recv(&r, sizeof(r)));
  if (r.status != 0 && r.refusal == static_cast<uint32_t>(HelloRefusal::kPeerConnLimit))
    return Status::NotAllowed("peer '" + peer.name + "' refused the connection: agents named '" +
                              std::string(self_name) + "' hold as many connections as it " +
                              "allows one peer (its AgentOptions.max_conns_per_peer)");
  // A target that failed on its side (out of memory taking the connection's
  // slot) answers kBackend: nothing wrong with our hello, and a retry may pass.
  if (r.status == static_cast<int32_t>(Code::kBackend))
    return Status::Backend("peer '" + peer.name +
                           "' failed to take the connection on its side (out of memory?)");
  if (r.status != 0)
    return Status::NotAllowed("peer '" + peer.name + "' refused our hello (stale metadata?)");
  if (!MacEquals(r.proof, ReadyProof(peer.secret, h.nonce, c.nonce, peer.agent_id)))
    return Status::NotAllowed("peer '" + peer.name +
                              "' could not prove it holds the secret of its metadata " +
                              "(another process at its address?)");
  return Status::Ok();
}

Status SayHello(const AgentContext& ctx, const AgentMeta& peer, int fd, ConnRole role,
                Deadline by) {
  // Bounded: a target that stalls half way through its challenge or reply
  // cannot hold the connect. The lanes then run without socket timeouts.
  DeadlineIo io(fd, by);
  KVLANE_RETURN_IF_ERROR(SayHello(ctx.name, peer, role, io));
  return SetIoTimeout(fd, std::chrono::milliseconds(0));
}

}  // namespace kvlane::core
