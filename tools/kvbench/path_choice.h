// The data path of a run: the transport that carries the bytes and the memory
// the pool lives in, resolved from --transport and --memory and from what this
// rank sees (is the peer on this host, how many GPUs are visible). Pure
// functions of their arguments; thread-safe.
#pragma once

#include <string>

#include "kvlane/memory.h"
#include "kvlane/status.h"

namespace kvbench {

struct DataPath {
  std::string transport;                                  // local | shm | tcp | cuda
  kvlane::MemoryKind memory = kvlane::MemoryKind::kHost;  // where each rank's pool lives
};

// "host" | "cuda": how --memory and the documents spell a kind.
const char* MemoryFlagName(kvlane::MemoryKind kind);

// Rejects, before anything connects, the --transport / --memory pairs no machine
// can run: device memory over local or shm (they move host memory only) and a host
// pool over cuda (it moves device and pinned host memory; kvbench's host pool is
// pageable). "auto" on either side passes. InvalidArgument saying why; also for an
// unknown --memory.
kvlane::Status CheckTransportMemory(const std::string& transport, const std::string& memory);

// Resolves both flags for one rank:
// - transport auto: tcp when the peer is on another host; on one host cuda when the
//   memory is cuda (or auto with at least two GPUs), else shm;
// - memory auto: cuda for the cuda transport, host otherwise.
// InvalidArgument for shm or cuda across hosts and for the pairs
// CheckTransportMemory rejects; NotSupported when the pool would live on a GPU and
// none is visible (gpus == 0).
kvlane::Result<DataPath> ResolveDataPath(const std::string& transport, const std::string& memory,
                                         bool same_host, int gpus);

// The GPU a rank's device pool lives on when --device is not given. On one host
// the two ranks split over two GPUs: GPU `rank`, clamped to the visible ones (both
// on GPU 0 with one GPU). Across hosts each rank is alone on its host: GPU 0, or
// `local_rank` modulo the visible GPUs when the launcher set one (LocalRank() in
// slurm.h: SLURM_LOCALID, then LOCAL_RANK; -1 when neither is set).
// REQUIRES: gpus >= 1, rank 0 or 1.
int DefaultDevice(int rank, bool same_host, int local_rank, int gpus);

// Whether the bytes pass through pinned host buffers on both ranks: tcp (or any
// host transport) moving device memory. "pinned-host" or "none".
std::string StagingName(const DataPath& path);

// How case names and chart series name a path: the transport, followed by
// "-<memory>" when the pool is not in the transport's own memory (cuda's is cuda,
// the host transports' is host): "shm", "cuda", "tcp", "tcp-cuda". Takes the
// documents' spellings, so that summaries can name older documents too.
std::string PathLabel(const std::string& transport, const std::string& memory);

}  // namespace kvbench
