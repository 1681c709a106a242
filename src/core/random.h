// Cryptographically random values for agent ids, secrets and region keys.
#pragma once

#include <cstdint>

namespace kvlane::core {

// Reads getrandom(2); aborts if the kernel cannot supply randomness.
uint64_t RandomU64();
void RandomBytes(void* out, uint64_t n);

// Random non-zero identifier of this process, fixed for its lifetime. A child
// made by fork() gets a new one: agents it makes do not take the copies of
// its parent's agents (no threads, memory copied on write) for local peers.
uint64_t ProcessToken();

}  // namespace kvlane::core
