// A kvlane agent in a child process that owns GPU memory, driven over pipes by
// the test or benchmark (the "target" rank). One line per command and reply.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvlane::test {

class TargetProc {
 public:
  // Spawns this executable with `--kvlane-cuda-target <device> <name>
  // <transport>`; the child's agent is called `name` and uses only `transport`.
  static TargetProc Spawn(int device, const std::string& name = "target",
                          const std::string& transport = "cuda");
  TargetProc() = default;
  TargetProc(TargetProc&& o) noexcept;
  TargetProc& operator=(TargetProc&& o) noexcept;
  ~TargetProc();

  // Sends one command line and returns the reply line ("" when the child is gone).
  std::string Call(const std::string& line);
  bool alive() const { return pid_ > 0; }
  void Kill();  // SIGKILL and reap
  // SIGSTOP, and waits until the child is stopped (its agent answers nothing
  // meanwhile); Continue resumes it. True once stopped.
  bool Stop();
  void Continue();

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

// The child's side: serves commands on stdin/stdout. Returns the exit code.
int RunTarget(int device, const std::string& name, const std::string& transport);
// Handles `--kvlane-cuda-target` in main(); returns -1 when not a target.
int MaybeRunTarget(int argc, char** argv);

std::string Hex(const std::string& bytes);
std::string Unhex(const std::string& hex);

// Fills / checks device memory with the test pattern (through host staging).
void FillDevice(void* dev, uint64_t len, uint64_t seed);
int64_t CheckDevice(const void* dev, uint64_t len, uint64_t seed);

}  // namespace kvlane::test
