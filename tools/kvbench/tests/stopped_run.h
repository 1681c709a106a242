// Starting `kvbench` as a child of a stop test and watching it end: its output to
// files, waits on what it prints, and clean-up of what a failed test left running.
// Header-only; used by the end-to-end stop tests (e2e_stop_test, e2e_prompt_stop_test).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/process_watch.h"
#include "kvbench_process.h"

namespace kvbench::testing {

// Starts `kvbench ARGS` as a child of this test, its stdout and stderr to the files
// named, with SIGINT's default action (as a terminal's foreground job has it).
inline pid_t StartKvbench(const std::vector<std::string>& args, const fs::path& out,
                          const fs::path& err) {
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    dup2(open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    signal(SIGINT, SIG_DFL);
    std::vector<char*> argv = {const_cast<char*>("kvbench")};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(KVBENCH_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

// Waits up to `limit` for `file` to hold `text`; whether it came.
inline bool WaitFor(const fs::path& file, const std::string& text, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (ReadFile(file).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Waits up to `limit` for child `pid`; kills it (SIGKILL) when it is still there.
// Whether it ended by itself (*status then says how).
inline bool EndsOrKill(pid_t pid, std::chrono::seconds limit, int* status) {
  if (kvlane_tools::EndsWithin(pid, limit, status)) return true;
  kill(pid, SIGKILL);
  waitpid(pid, status, 0);
  return false;
}

// Expects every process of `pids` gone within a few seconds; kills any left.
inline void ExpectGone(const std::vector<pid_t>& pids, const std::string& what) {
  for (pid_t pid : pids) {
    bool gone = kvlane_tools::Gone(pid);
    for (int i = 0; i < 500 && !gone; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      gone = kvlane_tools::Gone(pid);
    }
    EXPECT_TRUE(gone) << "process " << pid << " outlived " << what;
    if (!gone) {
      kill(pid, SIGKILL);
      kill(pid, SIGCONT);
    }
  }
}

// The --rank of a rank process, from its command line; -1 if none.
inline int RankOf(pid_t pid) {
  std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  const std::string flag = std::string("--rank") + '\0';
  const size_t at = cmdline.find(flag);
  return at == std::string::npos ? -1 : cmdline[at + flag.size()] - '0';
}

}  // namespace kvbench::testing
