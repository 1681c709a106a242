// The data path of a run: the transport that carries the bytes and the memory
// each rank's pool lives in, resolved from --transport and --memory and from what
// this rank sees (is the peer on this host, how many GPUs are visible). Pure
// functions of their arguments; thread-safe.
#pragma once

#include <string>

#include "kvlane/memory.h"
#include "kvlane/status.h"

namespace kvbench {

// What --memory asks of each rank: "auto" | "host" | "cuda". One word asks it of
// both ranks; a pair "TARGET,INITIATOR" (rank 0's first, each host or cuda) asks
// each its own, e.g. "cuda,host": the target's pool on its GPU, the initiator's in
// host memory (GPU-to-host offload by pull, host-to-GPU reload by push).
struct MemoryChoice {
  std::string target = "auto";
  std::string initiator = "auto";
  // The ranks' pools are in different kinds of memory.
  bool mixed() const { return target != initiator; }
  // REQUIRES: rank 0 or 1.
  const std::string& Of(int rank) const { return rank == 0 ? target : initiator; }
};

// Reads --memory: auto, host, cuda, or a pair of host and cuda ("host,host" is
// "host"). InvalidArgument for anything else (an unknown word, "auto" in a pair).
kvlane::Result<MemoryChoice> ParseMemory(const std::string& memory);

struct DataPath {
  std::string transport;                                     // local | shm | tcp | cuda
  kvlane::MemoryKind target = kvlane::MemoryKind::kHost;     // rank 0's pool
  kvlane::MemoryKind initiator = kvlane::MemoryKind::kHost;  // rank 1's pool
  // REQUIRES: rank 0 or 1.
  kvlane::MemoryKind Of(int rank) const { return rank == 0 ? target : initiator; }
  bool mixed() const { return target != initiator; }
};

// "host" | "cuda": how --memory and the documents spell a kind.
const char* MemoryFlagName(kvlane::MemoryKind kind);
// How the documents spell a path's memory: one kind when both ranks agree
// ("host", "cuda"), else the pair, target first ("cuda,host").
std::string MemoryName(const DataPath& path);

// Rejects, before anything connects, the --transport / --memory pairs no machine
// can run: device memory over local or shm (they move host memory only), a host
// pool over cuda (it moves device and pinned host memory; kvbench's host pool is
// pageable), and so a mixed pair ("cuda,host", "host,cuda") over any of the three:
// only tcp moves both kinds (it stages the device side through pinned host
// buffers). "auto" on either side passes. InvalidArgument saying why; also for a
// --memory ParseMemory rejects.
kvlane::Status CheckTransportMemory(const std::string& transport, const std::string& memory);

// Resolves both flags for rank `rank` (0 or 1), and the other rank's pool memory
// as its flags should resolve it:
// - transport auto: tcp when the peer is on another host or the pair is mixed; on
//   one host cuda when the memory is cuda (or auto with at least two GPUs), else shm;
// - memory auto: cuda for the cuda transport, host otherwise.
// InvalidArgument for shm or cuda across hosts and for the pairs
// CheckTransportMemory rejects; NotSupported when this rank's pool would live on a
// GPU and none is visible (gpus == 0). A rank whose pool is in host memory needs no GPU.
kvlane::Result<DataPath> ResolveDataPath(const std::string& transport, const std::string& memory,
                                         bool same_host, int gpus, int rank);

// The GPU a rank's device pool lives on when --device is not given. On one host
// the two ranks split over two GPUs: GPU `rank`, clamped to the visible ones (both
// on GPU 0 with one GPU). Across hosts each rank is alone on its host: GPU 0, or
// `local_rank` modulo the visible GPUs when the launcher set one (LocalRank() in
// slurm.h: SLURM_LOCALID, then LOCAL_RANK; -1 when neither is set).
// REQUIRES: gpus >= 1, rank 0 or 1.
int DefaultDevice(int rank, bool same_host, int local_rank, int gpus);

// Whether rank `rank`'s bytes pass through pinned host buffers on that rank: its
// pool is on a GPU and a host transport (tcp) moves it. The engine stages there,
// and so does the socket reference. REQUIRES: rank 0 or 1.
bool StagesOn(const DataPath& path, int rank);
// "pinned-host" when rank `rank` stages (StagesOn), else "none".
std::string StagingName(const DataPath& path, int rank);
// "pinned-host" when either rank stages, else "none" (a uniform path stages on
// both ranks or neither; a mixed one on its device side only).
std::string StagingName(const DataPath& path);

// The socket reference's method: "socket" when neither rank stages,
// "socket-staged" when both do, else "socket-staged-target" or
// "socket-staged-initiator" (the one rank whose device pool goes through a
// pinned buffer).
std::string SocketReferenceMethod(bool target_stages, bool initiator_stages);

// How case names and chart series name a path: the transport, followed by
// "-<memory>" when the pool is not in the transport's own memory (cuda's is cuda,
// the host transports' is host), and by both ranks' memory, target first, when
// the ranks differ: "shm", "cuda", "tcp", "tcp-cuda", "tcp-cuda-host",
// "tcp-host-cuda". Takes the documents' spellings (MemoryName), so that summaries
// can name older documents too.
std::string PathLabel(const std::string& transport, const std::string& memory);

}  // namespace kvbench
