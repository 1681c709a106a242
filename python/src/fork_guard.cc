#include "fork_guard.h"

#include <pthread.h>

#include <atomic>

namespace kvlane::python {
namespace {

std::atomic<uint64_t> generation{0};

void OnForkChild() { generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

void InitForkGuard() { (void)pthread_atfork(nullptr, nullptr, &OnForkChild); }

uint64_t ForkGeneration() { return generation.load(std::memory_order_relaxed); }

}  // namespace kvlane::python
