// RLIMIT_MEMLOCK pre-flight. Each case runs in a forked child so the test
// process keeps its limits; the child reports through its exit code and a pipe.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "kvlane/kvlane.h"

namespace kvlane {
namespace {

// Runs `body` in a child; returns (exit code, text it wrote).
template <typename F>
std::pair<int, std::string> InChild(F body) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, "pipe"};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    int rc = body(&out);
    (void)!write(fds[1], out.data(), out.size());
    _exit(rc);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, text};
}

TEST(Memlock, SoftLimitRaisedToHard) {
  auto [rc, text] = InChild([](std::string* out) {
    rlimit lim{};
    getrlimit(RLIMIT_MEMLOCK, &lim);
    rlim_t hard = lim.rlim_max == RLIM_INFINITY ? rlim_t{1} << 30 : lim.rlim_max;
    if (hard < (4u << 20)) return 10;  // cannot set up the case
    lim.rlim_cur = 64 << 10;
    lim.rlim_max = hard;
    if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0) return 11;
    Status s = EnsureMemlock(2 << 20);
    *out = s.ToString();
    if (!s.ok()) return 12;
    getrlimit(RLIMIT_MEMLOCK, &lim);
    return lim.rlim_cur == hard ? 0 : 13;
  });
  EXPECT_EQ(rc, 0) << text;
}

TEST(Memlock, AlreadyEnoughIsOk) {
  auto [rc, text] = InChild([](std::string* out) {
    rlimit lim{1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0) return 11;
    Status s = EnsureMemlock(4096);
    *out = s.ToString();
    return s.ok() ? 0 : 12;
  });
  EXPECT_EQ(rc, 0) << text;
}

TEST(Memlock, HardLimitTooLowReportsTheNumbers) {
  auto [rc, text] = InChild([](std::string* out) {
    rlimit lim{65536, 1048576};  // soft 64 KiB, hard 1 MiB
    if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0) return 11;
    Status s = EnsureMemlock(16777216);
    *out = s.ToString();
    if (s.code() != Code::kNotAllowed) return 12;
    getrlimit(RLIMIT_MEMLOCK, &lim);
    return lim.rlim_cur == 65536 ? 0 : 13;  // left alone on failure
  });
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("16777216"), std::string::npos) << "needed: " << text;
  EXPECT_NE(text.find("65536"), std::string::npos) << "soft: " << text;
  EXPECT_NE(text.find("1048576"), std::string::npos) << "hard: " << text;
}

}  // namespace
}  // namespace kvlane
