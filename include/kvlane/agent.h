// Agent: one endpoint of kvlane (one per process or GPU). Owns registrations,
// peers, lanes and request slots.
//
// Thread-safety: every method may be called from any thread, except that one
// XferHandle is used by one thread at a time. Check() makes no transport call and
// takes no lock, except to copy a failed post's message (a per-transfer mutex,
// never held for long). The transports' own threads drive progress.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvlane/descriptor.h"
#include "kvlane/memory.h"
#include "kvlane/options.h"
#include "kvlane/status.h"
#include "kvlane/transfer.h"

namespace kvlane {

namespace core {
class AgentImpl;
}

class Agent {
 public:
  static Result<std::unique_ptr<Agent>> Create(const AgentOptions& options);
  // Ends every request still in flight (kCanceled) and closes every channel. An
  // shm target copies into and out of this process's memory itself, so for a
  // request it was sent and has not answered, the destructor waits for it to let
  // go of the connection: for all shm peers at once, at most 2 x io_timeout + 1 s
  // in all, beside the other channels' own stops (a target that holds on past
  // that is left to copy into memory the caller must then keep: docs/SECURITY.md).
  ~Agent();
  // Does what the destructor does, once, and says what it left: kBackend when
  // a request is left poisoned (an shm target that held on past that wait, or
  // a wedged GPU): memory registered with this agent may still be copied into
  // or out of, so the caller must keep all of it. Later calls give the same
  // answer. REQUIRES: no other call of this agent in flight, and none after
  // but Close() again and the destructor.
  Status Close();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  const std::string& name() const;
  const AgentOptions& options() const;
  // Port the metadata listener is bound to (resolves metadata_listen "host:0");
  // 0 when options().metadata_listen is empty.
  uint16_t metadata_port() const;

  // Registers [addr, addr+len). Regions larger than options().piece_bytes are cut
  // into pieces transparently; an agent's regions hold at most 1,048,576 pieces
  // in all (what its metadata carries): one that would pass that is refused with
  // kInvalidArgument, as is a null address, a zero length, a range that wraps or
  // overlaps a registered one, or a kind other than kHost and kCuda. kHost memory
  // must be mapped readable and writable in this process, whatever `access` (which
  // limits peers only: this agent's own READs may land in any of its regions), as
  // /proc/self/maps says at this call (not checked when it cannot be read): else
  // kInvalidArgument naming the first byte that is not, so a device pointer or
  // read-only memory registered as kHost is refused here.
  // kCuda memory needs the cuda transport enabled, or tcp in a CUDA build on a
  // machine with a GPU (else kNotSupported). Where cuda is listed but idle (a
  // host with no usable device) the registration is taken, but the metadata
  // offers none of it over cuda and no transfer of it finds a transport. It must
  // be device memory or pinned (page-locked) host memory: other memory is
  // refused when a transfer first uses it (kNotSupported / kInvalidArgument),
  // not here. `device` is recorded in the
  // metadata for the peer to read; the transports use the device the memory
  // belongs to (cudaPointerGetAttributes), so a wrong ordinal changes nothing.
  // REQUIRES: the memory outlives the registration.
  // `access` is what peers may do and travels in the metadata. kReadOnly: a
  // peer's WRITE into the region fails with kNotAllowed and no byte of it
  // changes; a kvlane initiator refuses it at MakeTransfer, and this agent
  // refuses it again when it serves the access (local, shm, tcp). The cuda
  // transport cannot enforce it on device memory a peer mapped through CUDA
  // IPC: only well-behaved initiators honour it there (docs/SECURITY.md).
  Result<RegionId> RegisterMemory(void* addr, uint64_t len, MemoryKind kind = MemoryKind::kHost,
                                  int32_t device = 0, Access access = Access::kReadWrite);
  // Removes a region. Remote accesses in flight finish first; later ones fail
  // with kRemoteStale at the peer. Metadata exported earlier goes stale for it.
  // This agent's own transfers whose local side uses the region (and prepared
  // lists naming it) are refused from then on: Post and MakeTransfer return
  // kInvalidArgument, the handle stays valid; registering the memory again makes
  // a new region, which they do not use. Those in flight when it is called are
  // waited for (each ends by itself: it completes, or its lane fails after
  // io_timeout without progress), so the memory may be freed once it returns.
  // kBackend when a GPU that stopped answering (wedged) was left with a copy of
  // the region, or an shm target did not close a failed lane within 2 x io_timeout
  // + 1 s (it copies straight into and out of this process: a frame it held may
  // still be copied): the region is gone for new posts all the same, but its
  // memory must stay. (An shm lane that fails or closes with frames unanswered
  // waits for its target to close the connection before those requests end.)
  // A post that GPU finished just as its lane gave up (it reads kOk) does not
  // count: called meanwhile, this waits for the lane's decision.
  // kNotFound for a region not registered (or removed already).
  Status DeregisterMemory(RegionId region);

  // This agent's metadata: an opaque blob carrying its identity, secret,
  // endpoints and registered regions. Whoever holds it may access those regions.
  Result<std::string> ExportMetadata() const;
  // Loads a peer's blob (re-loading refreshes its region table). Returns its name.
  // A blob naming a loaded peer but carrying another agent id (that peer
  // restarted, or another agent took its name) replaces the entry, as RemovePeer
  // then LoadPeer would: lists and transfers made before keep the old one.
  // A refresh with a cuda channel open to the peer first asks the peer about
  // the table's device pieces that channel has not checked (the blob may be
  // older than a deregistration): one round trip on its control connection per
  // 8,192 new pieces, all within io_timeout x (2 + one per 8,192; the two for a
  // revocation the control thread may be finishing); a peer that does not
  // answer in time fails that channel (PeerError) and LoadPeer answers
  // kTimeout, the old table kept. A refresh waits for a connect to that peer
  // in progress (up to connect_timeout for each of its lanes_per_peer + 1
  // connections, per transport tried); a new peer's load waits for nothing.
  Result<std::string> LoadPeer(std::string_view blob);
  // Forgets a peer: PrepareRemote, SendNotification, PeerTransport and PeerError
  // naming it answer kNotFound from then on. Prepared lists and transfers made
  // before keep it: they still post to it, and its connections close once the
  // last of them is released. Loading its blob again makes a new entry with
  // connections of its own.
  Status RemovePeer(std::string_view peer);
  // The transport that moves `kind` memory to and from a peer ("local", "shm",
  // "tcp", "cuda"): the first enabled one, in options order, that moves that kind
  // directly and reaches the peer; only where none does, the first that stages it
  // through host memory (tcp for kCuda memory). Connects if needed.
  Result<std::string> PeerTransport(std::string_view peer, MemoryKind kind = MemoryKind::kHost);

  // Resolves a list once; the result is posted many times through transfers.
  // Ids are this agent's own, numbered from a random start (never 0, never one
  // alive): another agent's id reads kNotFound here unless it happens to equal
  // one of this agent's live ids (32-bit ids: rare, not impossible).
  // A remote list keeps the peer's pieces it resolved against the metadata
  // loaded then: once the peer deregisters them (even to register the same
  // memory again), every post through it ends kRemoteStale, and re-loading the
  // peer's blob does not change it: prepare the list (and its transfers) anew.
  Result<PreparedId> PrepareLocal(const DescList& list);
  Result<PreparedId> PrepareRemote(std::string_view peer, const DescList& list);
  Status ReleasePrepared(PreparedId id);

  // Pairs local[local_idx[i]] with remote[remote_idx[i]]. Empty index spans mean
  // "all descriptors in order". `notif` (may be empty: none; at most 64 KiB) is
  // delivered to the peer after the data is visible there. At most
  // kMaxTransferBytes and kMaxTransferPairs per transfer (transfer.h); past any of
  // these, an `xo.lane` that is not the peer channel's, or destinations that
  // overlap (a WRITE's remote descriptors, a READ's local ones: two pairs would
  // write the same bytes), kInvalidArgument; a WRITE into a read-only remote
  // region, kNotAllowed. kNotAllowed too when options().max_requests slots are
  // taken (by live transfers, or poisoned ones: Release). All of these are checked
  // before any connection is made to the peer; then the channel to it is opened
  // if it is not yet (LoadPeer says how long that may take).
  Result<XferHandle> MakeTransfer(Op op, PreparedId local, std::span<const uint32_t> local_idx,
                                  PreparedId remote, std::span<const uint32_t> remote_idx,
                                  std::string_view notif = {}, XferOptions xo = {});

  // How the transfer was planned (bytes, pairs, segments, chunks); a host
  // read, any time between MakeTransfer and Release. kNotFound when stale.
  // REQUIRES: not concurrent with Release of the same handle (a handle is used
  // by one thread at a time).
  Result<XferInfo> Describe(const XferHandle& handle) const;

  // Posts the transfer. Returns kInProgress (or kOk) on success and updates
  // handle->gen. REQUIRES: the previous post of this handle has finished, and
  // the bytes to move are in place: for device memory, the work that wrote them
  // has completed (kvlane copies on its own streams, not the caller's).
  // Allocates nothing on the way to a queued post (a refusal's message may). The
  // handle stays valid and owned by the caller on error.
  // Refused before anything is queued (nothing posted; Check and Wait still
  // report the previous post, kOk for one never posted: test Post's own
  // status before waiting on the handle): kNotAllowed while its previous post
  // is in flight, kNotFound when it is stale, the channel's latched error
  // (PeerError) once it failed, a local region deregistered since. When every
  // slot of a lane's ring is taken (lane_ring_slots), Post waits for one up to
  // AgentOptions::post_timeout: past it (kTimeout), or on the agent's close
  // (kCanceled), this post ends with that error, returned once the chunks
  // already queued drained (some bytes may have moved), and Check reads it.
  // A copy of the handle posted or released on another thread at the same
  // moment (against its REQUIRES): one of them gets kNotAllowed, nothing done.
  Status Post(XferHandle* handle);
  // Whether a Post of this handle now might wait for lane ring space: some
  // lane it could be queued on lacks room for its chunks (a peer that stopped
  // taking data, a burst of posts); or for the registry's lock: a region was
  // deregistered since its last post, so Post looks its regions up again (a
  // deregistration waiting on a peer's access holds that lock up). A host read
  // of the rings and a counter, no lock; a hint:
  // posts from other threads may take the room after it answered false. For
  // callers that must not block (an event loop, a binding that holds an
  // interpreter lock): hand a post that may wait to a thread that can.
  // False for a stale or never-made handle (Post then refuses at once).
  // REQUIRES: not concurrent with Release of the same handle.
  bool PostMayWait(const XferHandle& handle) const;
  // Acquire-load of the handle's terminal record. kInProgress, kOk or an error;
  // kNotFound when the handle is stale (a copy of a handle whose slot was
  // reposted or released; kInvalidArgument for XferHandle{}, which Release
  // leaves in the handle it was given). A transfer
  // never posted reads kOk (idle), as does Wait: only a Post moves bytes. A
  // post its lane gave up on (a wedged GPU: kTimeout) keeps its error even if
  // the GPU finishes it later; one the GPU finished as its lane gave up reads
  // kOk. Either way a post never reads kOk and then an error.
  Status Check(const XferHandle& handle) const;
  // Blocks until the request ends or `timeout` passes (then kTimeout);
  // nanoseconds::max() waits without a limit.
  Status Wait(const XferHandle& handle, std::chrono::nanoseconds timeout) const;
  // Cancels a request whose chunks no lane has started (then kOk; it ends as
  // kCanceled). A request a lane still owns: kNotAllowed, handle stays valid.
  // A finished request: kOk. Best effort: the lanes start work as soon as it
  // is posted (tcp and shm send a small request at once), so a cancel right
  // after a post often finds it owned; it is for work queued behind others.
  Status Cancel(const XferHandle& handle);
  // Frees the handle's slot and resets *handle to XferHandle{} (calls with that
  // handle then read kInvalidArgument; copies of the old one kNotFound). An
  // in-flight request is canceled first; if a lane still owns it, kNotAllowed and
  // the handle stays valid. kTimeout, the handle valid too, when the lane of a post
  // the GPU published holds it past io_timeout. A transfer left poisoned (its post
  // ended with "may still copy": an shm target or a wedged GPU that held on) is
  // released (kOk) but its slot stays taken for good, a bounded leak: MakeTransfer's
  // kNotAllowed for full slots counts them. Against a copy posted or released on
  // another thread at the same moment: kNotAllowed, or kNotFound once that post
  // began; the slot stays the post's.
  Status Release(XferHandle* handle);

  // Standalone notification of at most 64 KiB to a peer (ordered after this
  // agent's finished WRITEs). kNotFound for a peer not loaded. kNotAllowed when
  // the peer's queue of untaken notifications is full (its
  // max_notification_bytes or this sender's share of it): nothing was queued.
  // A WRITE's own notification meets the same limit after its data landed: the
  // transfer then ends kNotAllowed although its bytes are in place.
  Status SendNotification(std::string_view peer, std::string_view bytes);
  // Takes every notification received so far, oldest first. Out of memory it
  // takes none and returns none; they stay for a later call.
  std::vector<Notification> TakeNotifications();

  // First fatal error latched on the connection to `peer` (kOk when none);
  // kNotFound for a peer not loaded. A latched connection stays failed: every
  // later post and notification through it is refused with this error, and
  // re-loading the same blob keeps it. To talk to the peer again: RemovePeer,
  // LoadPeer (its current blob: a restarted peer has another), then prepare its
  // lists and make its transfers anew; the failed connection's threads and
  // sockets go once the last list and transfer made through it is released.
  Status PeerError(std::string_view peer) const;

  core::AgentImpl* impl() { return impl_.get(); }

 private:
  explicit Agent(std::unique_ptr<core::AgentImpl> impl);
  std::unique_ptr<core::AgentImpl> impl_;
};

// Fetches a peer's metadata from its metadata listener ("host:port"). The whole
// call (connect, request, reply) ends within `timeout`, 1 ms..24 h (else
// kInvalidArgument): kTimeout past it.
Result<std::string> FetchMetadata(const std::string& host_port, std::chrono::milliseconds timeout);

// Raises RLIMIT_MEMLOCK's soft limit towards the hard one so that `bytes` can be
// pinned; fails with the numbers (needed, soft, hard) when the hard limit is too low.
Status EnsureMemlock(uint64_t bytes);

// "kvlane 0.1.0 (git abcdef)".
std::string VersionString();

}  // namespace kvlane
