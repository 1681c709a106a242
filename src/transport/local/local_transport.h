// The local transport: peers in the same process. Each lane is a worker thread
// that copies with memcpy after checking the peer's live registration table.
// Connect refuses (kNotAllowed) a blob whose secret is not its agent's.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace kvlane::core {

std::unique_ptr<Transport> MakeLocalTransport(AgentContext* ctx);

}  // namespace kvlane::core
