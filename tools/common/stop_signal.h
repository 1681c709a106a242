// A stop request (SIGTERM, SIGINT, SIGHUP) caught by a tool, shared by kvbench and
// lanebench. The handler only records the first signal; the tool reads it where it
// can stop cleanly, does its clean-up and then dies by the signal (die_by.h). What a
// later stop signal does is the tool's choice (LaterStop); one that kills the tool
// at once removes the files RemoveOnLaterStop names first.
#pragma once

#include <cstddef>
#include <string>

namespace kvlane_tools {

// What the handler does with a stop signal that comes after the first one.
enum class LaterStop {
  kRecord,  // records it in place of the first (lanebench: its clean-up is short anyway)
  kIgnore,  // nothing: a kvbench rank spawned by the launcher, which ends it on a second stop
  kDie,     // dies by it at once, skipping the clean-up: a second Ctrl-C to a kvbench rank
};

// Installs the handler for SIGTERM, SIGINT and SIGHUP; a signal ignored at start (a
// background job's SIGINT, nohup's SIGHUP) stays ignored. Calling it again, also
// from two threads at once (the two rank threads of one process), changes only what
// a later stop does.
void CatchStopSignals(LaterStop later);
// The first signal that asked this process to stop (or, with kRecord, the latest),
// or 0. Async-signal-safe; any thread may call it.
int StopSignal();
// "SIGINT", "SIGTERM", ...; "signal N" for a number with no name.
std::string SignalName(int sig);

// A file this process is writing (a document's temporary file) that a later stop of
// LaterStop::kDie removes before the process dies by it, so that dying at once, with
// no clean-up, leaves no such file behind. The path is copied into a slot when the
// guard is made, before the file is, so the handler only calls unlink(2), which is
// async-signal-safe (and takes the slot with a lock-free atomic, which is too). Up to
// kMaxRemovedOnStop files at a time: a guard made when every slot is taken, or over a
// path longer than kMaxRemovedPath, covers nothing (armed() false). The handler never
// runs for a process that did not catch stop signals with kDie. Thread-safe.
class RemoveOnLaterStop {
 public:
  static constexpr int kMaxRemovedOnStop = 4;
  static constexpr size_t kMaxRemovedPath = 4096;  // bytes, the terminating NUL included

  explicit RemoveOnLaterStop(const std::string& path);
  // The file is no longer the handler's to remove (renamed, or removed already).
  ~RemoveOnLaterStop();
  RemoveOnLaterStop(const RemoveOnLaterStop&) = delete;
  RemoveOnLaterStop& operator=(const RemoveOnLaterStop&) = delete;

  bool armed() const { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

}  // namespace kvlane_tools
