// The stream transports: tcp (any host, payload inline on the socket) and shm
// (same host, unix-socket control with the target copying through cross-memory
// attach). Both share the wire format, the server and the channel.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace kvlane::core {

std::unique_ptr<Transport> MakeTcpTransport(AgentContext* ctx);
std::unique_ptr<Transport> MakeShmTransport(AgentContext* ctx);

}  // namespace kvlane::core
