// Tells a forked child from the process that made an agent, with one relaxed
// load (check() pays it on every poll; getpid() is a system call since glibc
// 2.25 stopped caching it).
#pragma once

#include <cstdint>

namespace kvlane::python {

// Registers the child handler of fork() (pthread_atfork). Called once, at import.
void InitForkGuard();

// How many fork()s this process is removed from the one that imported the
// module: 0 there, 1 in its child, and so on. An agent made at one generation
// is unusable at another.
uint64_t ForkGeneration();

}  // namespace kvlane::python
