#include "path_choice.h"

#include <algorithm>

namespace kvbench {
namespace {

std::string AutoTransport(const std::string& memory, bool same_host, int gpus) {
  if (!same_host) return "tcp";
  if (memory == "cuda" || (memory == "auto" && gpus >= 2)) return "cuda";
  return "shm";
}

kvlane::MemoryKind AutoMemory(const std::string& transport, const std::string& memory) {
  if (memory == "cuda" || (memory == "auto" && transport == "cuda")) {
    return kvlane::MemoryKind::kCuda;
  }
  return kvlane::MemoryKind::kHost;
}

}  // namespace

const char* MemoryFlagName(kvlane::MemoryKind kind) {
  return kind == kvlane::MemoryKind::kCuda ? "cuda" : "host";
}

kvlane::Status CheckTransportMemory(const std::string& transport, const std::string& memory) {
  if (memory != "auto" && memory != "host" && memory != "cuda") {
    return kvlane::Status::InvalidArgument("unknown memory '" + memory + "' (auto, host, cuda)");
  }
  if (memory == "cuda" && (transport == "local" || transport == "shm")) {
    return kvlane::Status::InvalidArgument(
        "--memory cuda with --transport " + transport + ": " + transport +
        " moves host memory only (a device pool needs --transport tcp or cuda)");
  }
  if (memory == "host" && transport == "cuda") {
    return kvlane::Status::InvalidArgument(
        "--memory host with --transport cuda: the cuda transport moves device and pinned host "
        "memory, and kvbench's host pool is pageable (use --memory cuda, or a host transport: "
        "local, shm, tcp)");
  }
  return kvlane::Status::Ok();
}

kvlane::Result<DataPath> ResolveDataPath(const std::string& transport, const std::string& memory,
                                         bool same_host, int gpus) {
  DataPath path;
  path.transport = transport == "auto" ? AutoTransport(memory, same_host, gpus) : transport;
  KVLANE_RETURN_IF_ERROR(CheckTransportMemory(path.transport, memory));
  if ((path.transport == "shm" || path.transport == "cuda") && !same_host) {
    return kvlane::Status::InvalidArgument(path.transport + " needs both ranks on one host");
  }
  path.memory = AutoMemory(path.transport, memory);
  if (path.memory == kvlane::MemoryKind::kCuda && gpus == 0) {
    const std::string what =
        path.transport == "cuda" ? "transport cuda" : "--memory cuda (over " + path.transport + ")";
    return kvlane::Status::NotSupported(what + ": no CUDA device visible to kvbench");
  }
  return path;
}

int DefaultDevice(int rank, bool same_host, int local_rank, int gpus) {
  if (same_host) return std::min(rank, gpus - 1);
  return local_rank >= 0 ? local_rank % gpus : 0;
}

std::string StagingName(const DataPath& path) {
  const bool staged = path.memory == kvlane::MemoryKind::kCuda && path.transport != "cuda";
  return staged ? "pinned-host" : "none";
}

std::string PathLabel(const std::string& transport, const std::string& memory) {
  const std::string own = transport == "cuda" ? "cuda" : "host";
  return memory.empty() || memory == own ? transport : transport + "-" + memory;
}

}  // namespace kvbench
