// The cuda transport's control path: a unix-socket connection per initiator,
// opened with the stream transports' handshake (transport/stream/handshake.h:
// each side proves it holds the target's secret, which never travels; role
// ConnRole::kCudaControl), then small frames both ways:
//   initiator -> target: kNotify (payload), kRevokeAck (seq), kFdRequest (key, index),
//                        kLiveCheck (piece keys, seq)
//   target -> initiator: kNotifyAck (status), kRevoke (piece keys, seq),
//                        kFdReply (status; an fd attached with SCM_RIGHTS when ok),
//                        kLiveReply (the checked keys no longer registered, seq)
// The target revokes pieces on DeregisterMemory and waits for every initiator
// to acknowledge, which each does once nothing it launched can touch them. A
// channel opening asks first which pieces of the metadata it loaded are still
// registered (kLiveCheck, answered once the connection counts as
// authenticated): revocations before that moment never reached it, later ones
// do. A table loaded again later (LoadPeer) has its new keys checked the same
// way before it is used, the answer read by the channel's control thread.
// File descriptors of VMM allocations are asked for on a short-lived connection
// of their own (FetchPeerFd), so the channel's control thread never sees one.
#pragma once

#include <atomic>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "transport/conn_set.h"
#include "transport/peer_conn_limit.h"
#include "transport/stream/fd_passing.h"
#include "transport/stream/socket.h"
#include "transport/transport.h"

namespace kvlane::core {

enum class CtlType : uint32_t {
  kNotify = 1,
  kNotifyAck = 2,
  kRevoke = 3,
  kRevokeAck = 4,
  kFdRequest = 5,
  kFdReply = 6,
  kLiveCheck = 7,
  kLiveReply = 8,
};

struct CtlFrame {
  uint32_t type;  // CtlType
  uint32_t len;   // payload bytes that follow
  uint64_t seq;   // kRevoke/kRevokeAck: revocation number; kNotifyAck, kFdReply: status
                  // (int32); kLiveCheck/kLiveReply: the check's number
};
static_assert(sizeof(CtlFrame) == 16);

inline constexpr uint32_t kMaxCtlPayload = 1u << 20;
inline constexpr uint32_t kMaxRevokeKeys = kMaxCtlPayload / 8;
// Keys one kLiveCheck of this version asks about (64 KiB); its kLiveReply names
// at most as many. (A target still takes checks of up to kMaxRevokeKeys, as
// earlier initiators sent.)
inline constexpr uint32_t kMaxLiveKeys = 8192;
// The text of a refused kFdRequest's kFdReply.
inline constexpr uint32_t kMaxFdReplyText = 512;

// The most payload a frame of `type` carries (every sender keeps to it;
// kMaxCtlPayload at most). A header that announces more is a protocol
// violation, refused before anything is allocated for it.
uint32_t CtlPayloadLimit(uint32_t type);

// Sends one frame (header + payload) by `deadline` (see SendIovBy: after a
// failure the connection is of no further use).
Status SendCtl(int fd, CtlType type, uint64_t seq, const void* payload, uint32_t len,
               Deadline deadline);
// Waits, without bound, for a frame to begin (a control connection idles
// between frames), then reads its header and payload (at most
// CtlPayloadLimit(type) bytes) into `payload` within `timeout`: a peer that
// stalls mid-frame is cut.
Status RecvCtl(int fd, CtlFrame* frame, std::string* payload, std::chrono::milliseconds timeout);
// The same with the wait for the frame to begin bounded too: all of it by `by`.
Status RecvCtlBy(int fd, CtlFrame* frame, std::string* payload, Deadline by);

// Reads frames from `fd` until the answer (kLiveReply) to live check `seq`,
// whose payload (the keys no longer registered) lands in `gone`; a revocation
// on the way goes to `on_revoke` (its keys and number; an error it returns
// ends the wait). All of it by `by` (kTimeout), however many revocations come:
// a peer that keeps sending them never answering cannot hold the caller.
// kBackend on any other frame.
Status AwaitLiveReply(int fd, uint64_t seq, Deadline by,
                      const std::function<Status(const std::string& keys, uint64_t seq)>& on_revoke,
                      std::string* gone);

// The abstract unix socket name of agent `agent_id`'s control server.
std::string ControlSocketName(uint64_t agent_id);

// Dials `socket` and authenticates as `self_name`, an initiator of `peer`
// (its name, agent_id and secret are used), which must prove it holds that
// secret too (NotAllowed otherwise); the whole exchange ends within
// `connect_timeout`. The socket comes back with connect_timeout as its send
// and receive timeouts (SetIoTimeout).
Result<Fd> DialControl(const std::string& self_name, std::chrono::milliseconds connect_timeout,
                       const AgentMeta& peer, const std::string& socket);
// The same for a channel's connection to `peer`, whose metadata announced
// `socket`: NotAllowed unless that is the name `peer`'s agent id gives.
Result<Fd> DialControl(const AgentContext& ctx, const AgentMeta& peer, const std::string& socket);

// kFdRequest payload: the piece key and the index of the VMM allocation under it.
struct FdRequest {
  uint64_t key;
  uint32_t index;
  uint32_t reserved;  // zero
};
static_assert(sizeof(FdRequest) == 16);

// Where and as whom to ask a peer for a VMM allocation's file descriptor.
struct FdPeer {
  std::string self_name;
  AgentMeta peer;  // name, agent_id and secret
  std::string socket;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds io_timeout{10000};
  // Every fetch made with this FdPeer (e.g. all the allocations of one VMM
  // import) ends by then; by default connect_timeout + 4 io_timeouts after it
  // was made (a slow peer cannot hold the caller for one timeout per allocation).
  Deadline deadline = DeadlineIn(connect_timeout + 4 * io_timeout);
  // When set (e.g. to the channel's closing flag), no fetch starts once it is true.
  const std::atomic<bool>* cancel = nullptr;
};
// Dials the peer, asks for allocation `index` of piece `key` and returns the fd
// it sends (the caller closes it). The peer's refusal comes back as its status;
// kTimeout past p.deadline or io_timeout, kCanceled once *p.cancel is set.
Result<Fd> FetchPeerFd(const FdPeer& p, uint64_t key, uint32_t index);

// Target side: the fd of allocation `index` under piece `key`, for an
// authenticated peer. Must refuse keys not registered (or deregistered).
using FdSource = std::function<Result<Fd>(uint64_t key, uint32_t index)>;

// Target side. Thread-safety: Revoke from any thread; Start/Stop from the owner.
class ControlServer {
 public:
  // `fds` answers kFdRequest (empty: every request is refused).
  // REQUIRES: ctx->peer_conns != nullptr.
  explicit ControlServer(AgentContext* ctx, FdSource fds = {})
      : ctx_(ctx), fds_(std::move(fds)), peer_conns_(ctx->peer_conns) {
    assert(peer_conns_ != nullptr);
  }
  ~ControlServer() { Stop(); }

  Status Start(const std::string& socket);
  void Stop() { conns_.Stop(); }
  // Tells every connected initiator that `keys` are gone and waits for each to
  // acknowledge; an initiator that does not is cut off. Bounded by 2 x
  // io_timeout however many connections there are: io_timeout to send to all
  // of them side by side (the waits for their write locks included: see
  // FanoutSend), then io_timeout for the acknowledgements. Never blocks
  // holding conns_.mu().
  void Revoke(std::span<const uint64_t> keys);

 private:
  struct Conn {
    Fd fd;
    std::thread thread;
    std::mutex write_mu;        // one frame at a time; each send bounded by io_timeout
    uint64_t sent = 0;          // newest revocation sent (or about to be); GUARDED_BY(conns_.mu())
    uint64_t acked = 0;         // GUARDED_BY(conns_.mu())
    int pins = 0;               // Revoke calls using it: it stays alive; GUARDED_BY(conns_.mu())
    // Past the Hello: only such a connection gets revocations (a frame sent
    // into a handshake would break it, and an unproven peer learns nothing).
    bool authed = false;        // GUARDED_BY(conns_.mu())
    bool leaving = false;       // its thread is about to finish; GUARDED_BY(conns_.mu())
    bool done = false;          // GUARDED_BY(conns_.mu())
  };
  void Serve(Conn* c);
  // The handshake (at most max_conns_per_peer connections per peer name, counted
  // with the agent's other servers), then
  // frames until the connection ends; returns holding no slot.
  void Run(Conn* c);
  // Handles one frame from an authenticated initiator; false: drop the connection.
  bool Handle(Conn* c, const std::string& name, const CtlFrame& f, const std::string& payload);
  // Records the acknowledgement of revocation `seq`; false: not sent yet (a violation).
  bool Acknowledged(Conn* c, uint64_t seq);
  // Waits (io_timeout) until each of `to` acknowledged `seq` or left; cuts those
  // that did not, and unpins them all.
  void WaitAcks(const std::vector<Conn*>& to, uint64_t seq);
  Status ServeFd(Conn* c, const std::string& request);  // fd_request.cc
  // Answers a kLiveCheck with the keys of `keys` the registry no longer holds.
  Status ServeLiveCheck(Conn* c, uint64_t seq, const std::string& keys);

  AgentContext* ctx_;
  const FdSource fds_;
  std::mutex revoke_mu_;     // one Revoke at a time: numbers go out in order everywhere
  uint64_t revoke_seq_ = 0;  // GUARDED_BY(revoke_mu_)
  // The agent's, shared with its other servers; slots held by connection threads:
  // outlives conns_ below.
  const std::shared_ptr<PeerConnLimit> peer_conns_;
  ConnSet<Conn> conns_;      // last: stopped (threads joined) before the members above go
};

}  // namespace kvlane::core
