// Plain launchers for kvbench's pattern kernels: raw pointers and a stream, no
// device code. Each takes a table of extents in device memory and moves over all
// of it in one launch (one block per entry). Host code includes only this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/pattern_types.h"

namespace kvbench::gpu {

inline constexpr int kPatternThreads = 256;  // threads per block

// Writes the pattern of (rank, epoch) into every extent of table[0, n).
// REQUIRES: table is device memory; 1 <= n < kMaxEntries.
cudaError_t LaunchFillPattern(const PatternExtent* table, uint64_t n, uint32_t rank, uint64_t epoch,
                              cudaStream_t stream);

// Writes `byte` into every byte of every extent of table[0, n).
cudaError_t LaunchWipe(const PatternExtent* table, uint64_t n, uint8_t byte, cudaStream_t stream);

// Checks every byte of table[0, n) against the pattern of (rank, epoch) and leaves
// the count of differing bytes and the first one in *totals (device memory), which
// it resets first. REQUIRES: every entry's len < kMaxEntryBytes.
cudaError_t LaunchVerifyPattern(const PatternExtent* table, uint64_t n, uint32_t rank,
                                uint64_t epoch, VerifyTotals* totals, cudaStream_t stream);

}  // namespace kvbench::gpu
