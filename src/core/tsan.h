// ThreadSanitizer and remote accesses. A remote READ or WRITE is ordered by the
// peer: it sent the frame only after whatever made the bytes ready (its own
// earlier requests, its exchange with this process through the network or a
// pipe). TSan sees no happens-before through sockets or across processes, so it
// would report every served payload copy as racing with the target's own
// accesses to its registered memory. ScopedRemoteCopy exempts exactly the
// payload copy of a served frame (the syscall that moves registered bytes);
// every other access of the serving thread stays checked. No-op without TSan.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define KVLANE_TSAN_ON 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVLANE_TSAN_ON 1
#endif
#endif

#ifdef KVLANE_TSAN_ON
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace kvlane::core {

class ScopedRemoteCopy {
 public:
#ifdef KVLANE_TSAN_ON
  ScopedRemoteCopy() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~ScopedRemoteCopy() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
#else
  ScopedRemoteCopy() {}  // user-provided: no unused-variable warning at the call sites
  ~ScopedRemoteCopy() {}
#endif
  ScopedRemoteCopy(const ScopedRemoteCopy&) = delete;
  ScopedRemoteCopy& operator=(const ScopedRemoteCopy&) = delete;
};

}  // namespace kvlane::core
