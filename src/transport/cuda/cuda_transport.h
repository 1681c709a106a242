// The cuda transport: device memory (and pinned host memory) between GPUs of
// one host, across processes through legacy CUDA IPC handles and inside one
// process through peer access. Without a usable GPU it starts but reaches nobody.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace kvlane::core {

std::unique_ptr<Transport> MakeCudaTransport(AgentContext* ctx);

}  // namespace kvlane::core
