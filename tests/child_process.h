// ChildProcess: spawns a real process (fork + exec) with its stdin and stdout
// on pipes, for line-oriented request/response with the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace kvlane::test {

class ChildProcess {
 public:
  // Starts `argv[0]` with `argv`. Check running() afterwards.
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();  // SIGKILLs and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Sends one line and returns the reply line ("<timeout>" / "<eof>" on failure).
  std::string Ask(const std::string& line, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // SIGKILL and reap.
  void Kill();
  // Waits for a normal exit; returns the exit status or -1.
  int Join();

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string pending_;
};

// Hex encoding of arbitrary bytes (blobs travel as text lines).
std::string ToHex(std::string_view bytes);
std::string FromHex(const std::string& hex);

}  // namespace kvlane::test
