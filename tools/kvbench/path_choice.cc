#include "path_choice.h"

#include <algorithm>

namespace kvbench {
namespace {

bool IsKind(const std::string& word) { return word == "host" || word == "cuda"; }

std::string AutoTransport(const MemoryChoice& memory, bool same_host, int gpus) {
  if (!same_host || memory.mixed()) return "tcp";
  if (memory.target == "cuda" || (memory.target == "auto" && gpus >= 2)) return "cuda";
  return "shm";
}

kvlane::MemoryKind AutoMemory(const std::string& transport, const std::string& memory) {
  if (memory == "cuda" || (memory == "auto" && transport == "cuda")) {
    return kvlane::MemoryKind::kCuda;
  }
  return kvlane::MemoryKind::kHost;
}

// One word for both ranks: the refusals of a single kind.
kvlane::Status CheckUniform(const std::string& transport, const std::string& memory) {
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

// A host pool on one rank and a device pool on the other: tcp only.
kvlane::Status CheckMixed(const std::string& transport, const std::string& memory) {
  const std::string flags = "--memory " + memory + " with --transport " + transport + ": ";
  const char* fix =
      " (a host pool on one rank and a device pool on the other needs --transport tcp, which "
      "stages the device side through pinned host buffers)";
  if (transport == "local" || transport == "shm") {
    return kvlane::Status::InvalidArgument(flags + transport +
                                           " moves host memory only, and one rank's pool would be "
                                           "on a GPU" +
                                           fix);
  }
  if (transport == "cuda") {
    return kvlane::Status::InvalidArgument(
        flags +
        "the cuda transport moves device and pinned host memory, and kvbench's host pool is "
        "pageable" +
        fix);
  }
  return kvlane::Status::Ok();
}

std::string NoGpu(const DataPath& path, const std::string& memory, int rank) {
  if (path.transport == "cuda") return "transport cuda";
  if (!path.mixed()) return "--memory cuda (over " + path.transport + ")";
  return "--memory " + memory + " (over " + path.transport + ") puts the " +
         (rank == 0 ? "target" : "initiator") + "'s pool, this rank's, on a GPU";
}

}  // namespace

kvlane::Result<MemoryChoice> ParseMemory(const std::string& memory) {
  const size_t comma = memory.find(',');
  if (comma == std::string::npos) {
    if (memory == "auto" || IsKind(memory)) return MemoryChoice{memory, memory};
    return kvlane::Status::InvalidArgument("unknown memory '" + memory +
                                           "' (auto, host, cuda, or a pair TARGET,INITIATOR "
                                           "such as cuda,host)");
  }
  MemoryChoice c{memory.substr(0, comma), memory.substr(comma + 1)};
  if (!IsKind(c.target) || !IsKind(c.initiator)) {
    return kvlane::Status::InvalidArgument(
        "--memory '" + memory +
        "': a pair names the target's memory, then the initiator's, each host or cuda "
        "(e.g. cuda,host)");
  }
  return c;
}

const char* MemoryFlagName(kvlane::MemoryKind kind) {
  return kind == kvlane::MemoryKind::kCuda ? "cuda" : "host";
}

std::string MemoryName(const DataPath& path) {
  if (!path.mixed()) return MemoryFlagName(path.target);
  return std::string(MemoryFlagName(path.target)) + "," + MemoryFlagName(path.initiator);
}

kvlane::Status CheckTransportMemory(const std::string& transport, const std::string& memory) {
  KVLANE_ASSIGN_OR_RETURN(MemoryChoice choice, ParseMemory(memory));
  return choice.mixed() ? CheckMixed(transport, memory) : CheckUniform(transport, choice.target);
}

kvlane::Result<DataPath> ResolveDataPath(const std::string& transport, const std::string& memory,
                                         bool same_host, int gpus, int rank) {
  KVLANE_ASSIGN_OR_RETURN(MemoryChoice choice, ParseMemory(memory));
  DataPath path;
  path.transport = transport == "auto" ? AutoTransport(choice, same_host, gpus) : transport;
  KVLANE_RETURN_IF_ERROR(CheckTransportMemory(path.transport, memory));
  if ((path.transport == "shm" || path.transport == "cuda") && !same_host) {
    return kvlane::Status::InvalidArgument(path.transport + " needs both ranks on one host");
  }
  path.target = AutoMemory(path.transport, choice.target);
  path.initiator = AutoMemory(path.transport, choice.initiator);
  if (path.Of(rank) == kvlane::MemoryKind::kCuda && gpus == 0) {
    return kvlane::Status::NotSupported(NoGpu(path, memory, rank) +
                                        ": no CUDA device visible to kvbench");
  }
  return path;
}

int DefaultDevice(int rank, bool same_host, int local_rank, int gpus) {
  if (same_host) return std::min(rank, gpus - 1);
  return local_rank >= 0 ? local_rank % gpus : 0;
}

bool StagesOn(const DataPath& path, int rank) {
  return path.Of(rank) == kvlane::MemoryKind::kCuda && path.transport != "cuda";
}

std::string StagingName(const DataPath& path, int rank) {
  return StagesOn(path, rank) ? "pinned-host" : "none";
}

std::string StagingName(const DataPath& path) {
  return StagesOn(path, 0) || StagesOn(path, 1) ? "pinned-host" : "none";
}

std::string SocketReferenceMethod(bool target_stages, bool initiator_stages) {
  if (target_stages && initiator_stages) return "socket-staged";
  if (target_stages) return "socket-staged-target";
  return initiator_stages ? "socket-staged-initiator" : "socket";
}

std::string PathLabel(const std::string& transport, const std::string& memory) {
  const size_t comma = memory.find(',');
  if (comma != std::string::npos) {
    return transport + "-" + memory.substr(0, comma) + "-" + memory.substr(comma + 1);
  }
  const std::string own = transport == "cuda" ? "cuda" : "host";
  return memory.empty() || memory == own ? transport : transport + "-" + memory;
}

}  // namespace kvbench
