// Cryptographically random values for agent ids, secrets and region keys.
#pragma once

#include <cstdint>

namespace kvlane::core {

// Reads getrandom(2); aborts if the kernel cannot supply randomness.
uint64_t RandomU64();
void RandomBytes(void* out, uint64_t n);

// Random non-zero identifier of this process, fixed for its lifetime.
uint64_t ProcessToken();

}  // namespace kvlane::core
