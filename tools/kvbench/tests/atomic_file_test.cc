#include "atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kvbench {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the temp directory, removed with all it holds.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("kvbench_atomic_" + std::to_string(getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // The names in the directory.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename());
    return names;
  }

 private:
  fs::path path_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(AtomicFile, AFreshNameReplacesNothing) {
  TempDir dir;
  auto written = WriteFileAtomically(dir / "doc.json", "first\n");
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(written->path, dir / "doc.json");
  EXPECT_FALSE(written->replaced);
  EXPECT_EQ(ReadFile(dir / "doc.json"), "first\n");
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"doc.json"});  // no temporary file left
}

TEST(AtomicFile, AnExistingNameIsReplacedAndSaysSo) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir / "doc.json", "first\n").ok());
  auto written = WriteFileAtomically(dir / "doc.json", "second\n");
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_TRUE(written->replaced);
  EXPECT_EQ(ReadFile(dir / "doc.json"), "second\n");
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"doc.json"});
}

TEST(AtomicFile, AFailedWriteLeavesTheNameAlone) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir / "doc.json", "first\n").ok());
  EXPECT_FALSE(WriteFileAtomically(dir / "missing/doc.json", "x").ok());
  fs::create_directories(dir / "taken");  // a directory cannot be renamed over
  std::ofstream(dir / "taken/file") << "x";
  EXPECT_FALSE(WriteFileAtomically(dir / "taken", "x").ok());
  EXPECT_EQ(ReadFile(dir / "doc.json"), "first\n");
  EXPECT_EQ(ReadFile(dir / "taken/file"), "x");
  EXPECT_EQ(dir.Names().size(), 2u);  // doc.json and taken: no temporary file left
}

// Writers racing to write one fresh name: exactly one of them replaced nothing, in
// every round (checking for the name apart from the rename let several say so).
TEST(AtomicFile, OfWritersRacingForAFreshNameOneReplacedNothing) {
  TempDir dir;
  constexpr int kWriters = 4, kRounds = 300;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = dir / ("doc" + std::to_string(round) + ".json");
    std::atomic<int> ready{0}, fresh{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        ready.fetch_add(1);
        while (ready.load() < kWriters) std::this_thread::yield();
        auto written = WriteFileAtomically(path, std::to_string(w));
        EXPECT_TRUE(written.ok()) << written.status().message();
        if (written.ok() && !written->replaced) fresh.fetch_add(1);
      });
    }
    for (std::thread& t : writers) t.join();
    ASSERT_EQ(fresh.load(), 1) << "round " << round;
  }
}

}  // namespace
}  // namespace kvbench
