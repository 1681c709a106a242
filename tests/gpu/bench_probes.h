// cuda_bench's probes: bare mechanisms (not kvlane) beside the reference of
// the same bytes, each adding its own rows to the table (Row, ProbeRow). Those
// of a full run are in bench_probes.cc, those of --probes2 in bench_probes2.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.h"

namespace kvlane::test {

// Probe (not kvlane): the bare copy kernel over the scattered list, GPU 0 ->
// GPU 1 in this process, for several work cuts; microseconds per launch.
void KernelSweep(Bench& b, const std::vector<uint32_t>& ls, const std::vector<uint32_t>& rs,
                 uint64_t n, uint64_t d);

// Probe (not kvlane): the copy kernel (LaunchCopySegments, one block per
// descriptor) over the scattered list with every destination moved by 8, 4, 2
// and 1 bytes off the source's congruence, and the byte loop it used for such
// pairs before; each beside the same list aligned, in this run. After each
// variant's first launch the whole destination span is checked: every
// descriptor's bytes landed, every other byte kept its fill.
void MisalignProbe(Bench& b, const std::vector<uint32_t>& ls, const std::vector<uint32_t>& rs,
                   uint64_t n, uint64_t d);

// Probe (not kvlane): the copy-engine mechanism of the bulk path alone, on the
// target's IPC-mapped buffer: cudaMemcpyAsync + cuStreamWriteValue64 into
// pinned host memory that this thread polls, and cudaMemcpyAsync +
// cudaStreamSynchronize; each beside the reference of the same bytes.
// Runs after every kvlane row: the agent opened the same handle before.
void CopyEngineProbe(Bench& b);

// ---- --probes2: bare mechanisms beside the reference, in this process only
// (no target process, no agent): b.local on GPU 0, b.ref_dst on GPU 1.

// Probe (not kvlane): the copy kernel over the list of Scattered, pushed by
// GPU 0 (NVLink stores), pulled by GPU 1 (NVLink loads), and split between
// both at once; GB/s over all bytes beside the reference (GPU 0 -> GPU 1).
// Returns the verification ("PASS" or why not).
std::string PushPullProbe(Bench& b);

// Probe (not kvlane): a contiguous copy GPU 0 -> GPU 1 by the copy kernel and
// a done word in pinned host memory, instead of the copy engine; latency.
void KernelDoneProbe(Bench& b);

}  // namespace kvlane::test
