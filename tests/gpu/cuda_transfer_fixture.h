// The base fixture of cuda_transfer_test: this process is the initiator on
// GPU 0, with an agent called "init" on the cuda transport; a child process
// (TargetProc, called "target") owns the remote memory on GPU 1, or on GPU 0
// too (two processes sharing one device), as the parameter says: "two_gpus"
// or "one_gpu"; "tcp_one_gpu" and "tcp_two_gpus" put both agents on the tcp
// transport instead (device memory staged through pinned host memory). SetUp
// skips when the GPUs are not there.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kvlane/kvlane.h"
#include "target_proc.h"

namespace kvlane::test {

inline int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// A buffer in the target process: its address and the RegionId of its
// registration there (0: not registered).
struct Remote {
  uint64_t addr = 0;
  uint64_t region = 0;
};

class CudaTransferTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    int n = DeviceCount();
    if (n == 0) GTEST_SKIP() << "no CUDA device";
    const bool two = GetParam().ends_with("two_gpus");
    if (two && n < 2) GTEST_SKIP() << "needs two GPUs";
    cudaSetDevice(0);
    target_ = TargetProc::Spawn(two ? 1 : 0, "target", transport());
    ASSERT_TRUE(target_.alive());
  }
  void MakeAgent(AgentOptions o = {}) {
    o.name = "init";
    o.transports = {transport()};
    auto a = Agent::Create(o);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    agent_ = std::move(a).value();
  }
  // `read_only`: registered with Access::kReadOnly.
  Remote Alloc(uint64_t bytes, bool read_only = false) {
    std::istringstream in(
        target_.Call((read_only ? "allocro " : "alloc ") + std::to_string(bytes)));
    Remote r;
    in >> r.addr >> r.region;
    return r;
  }
  void Load() {
    auto name = agent_->LoadPeer(Unhex(target_.Call("meta")));
    ASSERT_TRUE(name.ok()) << name.status().ToString();
  }
  // The target's reply to the command line "<cmd> <addr> <len> <arg>".
  std::string RemoteCall(const char* cmd, uint64_t addr, uint64_t len, uint64_t arg) {
    return target_.Call(std::string(cmd) + " " + std::to_string(addr) + " " + std::to_string(len) +
                        " " + std::to_string(arg));
  }
  // Fills the target's [addr, addr + len) with the pattern of `seed`; "ok"
  // once the bytes landed there.
  std::string RemoteFill(uint64_t addr, uint64_t len, uint64_t seed) {
    return RemoteCall("fill", addr, len, seed);
  }
  int64_t RemoteCheck(uint64_t addr, uint64_t len, uint64_t seed) {
    return std::stoll(RemoteCall("check", addr, len, seed));
  }
  // Sets the target's [addr, addr + len) to `byte`; "ok" once done.
  std::string RemoteMemset(uint64_t addr, uint64_t len, uint8_t byte) {
    return RemoteCall("memset", addr, len, byte);
  }
  // The first offset in the target's [addr, addr + len) not equal to `byte`; -1: none.
  int64_t RemoteCheckByte(uint64_t addr, uint64_t len, uint8_t byte) {
    return std::stoll(RemoteCall("checkbyte", addr, len, byte));
  }
  uint8_t* DevAlloc(uint64_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    bufs_.push_back(p);
    return static_cast<uint8_t*>(p);
  }
  // Registers device memory [p, p + bytes) with agent_; call under ASSERT_NO_FATAL_FAILURE.
  void Register(void* p, uint64_t bytes) {
    auto region = agent_->RegisterMemory(p, bytes, MemoryKind::kCuda);
    ASSERT_TRUE(region.ok()) << region.status().ToString();
  }
  // *p = DevAlloc(bytes), filled from `seed` if given, then registered; call under
  // ASSERT_NO_FATAL_FAILURE.
  void DevAllocRegistered(uint8_t** p, uint64_t bytes, std::optional<uint64_t> seed = {}) {
    *p = DevAlloc(bytes);
    if (seed) FillDevice(*p, bytes, *seed);
    ASSERT_NO_FATAL_FAILURE(Register(*p, bytes));
  }
  XferHandle Make(Op op, const DescList& l, const DescList& r, std::string_view notif = {},
                  XferOptions xo = {}, const std::string& peer = "target") {
    auto pl = agent_->PrepareLocal(l);
    auto pr = agent_->PrepareRemote(peer, r);
    EXPECT_TRUE(pl.ok() && pr.ok()) << pl.status().ToString() << pr.status().ToString();
    auto h = agent_->MakeTransfer(op, pl.value(), {}, pr.value(), {}, notif, xo);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h.value() : XferHandle{};
  }
  // A list of the one descriptor [at, at + len); `at` is a pointer or an address.
  template <typename At>
  static DescList Contig(At at, uint64_t len, MemoryKind kind = MemoryKind::kCuda) {
    DescList d{kind, {}};
    d.Add(at, len);
    return d;
  }
  // Make() over `len` bytes at device memory `local` and at the peer's `remote`.
  XferHandle MakeOne(Op op, const void* local, uint64_t remote, uint64_t len,
                     std::string_view notif = {}, XferOptions xo = {},
                     const std::string& peer = "target") {
    return Make(op, Contig(local, len), Contig(remote, len), notif, xo, peer);
  }
  std::string transport() const { return GetParam().starts_with("tcp_") ? "tcp" : "cuda"; }
  Status PostWait(XferHandle* h) {
    Status s = agent_->Post(h);
    if (s.is_error()) return s;
    return agent_->Wait(*h, std::chrono::seconds(20));
  }
  void TearDown() override {
    agent_.reset();
    for (void* p : bufs_) cudaFree(p);
  }

  TargetProc target_;
  std::unique_ptr<Agent> agent_;
  std::vector<void*> bufs_;
};

}  // namespace kvlane::test
