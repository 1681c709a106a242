// The stream handshake (wire.h), run on a fresh tcp or shm connection before any
// frame: the target sends a challenge, the initiator answers with a Hello that
// proves it holds the target's secret, and the target's reply proves the same
// the other way. The secret never travels; both proofs cover both fresh nonces,
// so a captured Hello or reply is refused on any other connection.
//
// Thread-safety: free functions; each call uses only its own fd.
#pragma once

#include <string>

#include "core/metadata.h"
#include "transport/stream/wire.h"
#include "transport/transport.h"

namespace kvlane::core {

// Target side. REQUIRES: fd's receive timeout bounds a silent peer (StreamServer
// sets connect_timeout). On success returns the initiator's name; on refusal the
// initiator was sent kNotAllowed, NotAllowed is returned and the caller closes fd.
Result<std::string> AcceptHello(const AgentContext& ctx, int fd);

// Initiator side, for a connection to `peer`; every step bounded by
// connect_timeout, and fd left without I/O timeouts on success. NotAllowed when
// the target refuses our Hello or cannot prove it holds peer.secret; NotSupported
// when it speaks another wire version; Timeout or RemoteDisconnect (saying so)
// when no challenge comes.
Status SayHello(const AgentContext& ctx, const AgentMeta& peer, int fd, ConnRole role);

}  // namespace kvlane::core
