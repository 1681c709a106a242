#include "target_proc.h"

#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "kvlane/kvlane.h"
#include "test_util.h"
#include "vmm_alloc.h"

namespace kvlane::test {

std::string Hex(const std::string& b) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) out += d[c >> 4], out += d[c & 15];
  return out;
}

std::string Unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

void FillDevice(void* dev, uint64_t len, uint64_t seed) {
  std::vector<uint8_t> h(len);
  Fill(h, seed);
  cudaMemcpy(dev, h.data(), len, cudaMemcpyDefault);
  // From pageable memory cudaMemcpy may return before the DMA landed; the
  // engine copies on its own (non-blocking) streams, so wait here (the legacy
  // stream only: a device-wide sync would also wait for the proxy's renewal).
  cudaStreamSynchronize(cudaStreamLegacy);
}

// Zeroes a new allocation before anyone is told of it: a peer process writes it
// through CUDA IPC, which compute-sanitizer's initcheck in this process cannot
// see, so a later check of bytes only the peer wrote would read as uninitialized
// (and a check of bytes nobody wrote would compare garbage). Waited for as in
// FillDevice. False (the error cleared) when CUDA failed.
bool ZeroDevice(void* dev, uint64_t len) {
  if (cudaMemset(dev, 0, len) == cudaSuccess &&
      cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess)
    return true;
  (void)cudaGetLastError();
  return false;
}

int64_t CheckDevice(const void* dev, uint64_t len, uint64_t seed) {
  std::vector<uint8_t> h(len);
  if (cudaMemcpy(h.data(), dev, len, cudaMemcpyDefault) != cudaSuccess) return -2;
  return FirstMismatch(h.data(), len, seed);
}

TargetProc TargetProc::Spawn(int device, const std::string& name, const std::string& transport) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(down[0], 0);
    dup2(up[1], 1);
    close(down[1]);
    close(up[0]);
    std::string dev = std::to_string(device);
    execl("/proc/self/exe", "target", "--kvlane-cuda-target", dev.c_str(), name.c_str(),
          transport.c_str(), nullptr);
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  TargetProc t;
  t.pid_ = pid;
  t.to_ = down[1];
  t.from_ = up[0];
  return t;
}

TargetProc::TargetProc(TargetProc&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), to_(std::exchange(o.to_, -1)), from_(std::exchange(o.from_, -1)) {}

TargetProc& TargetProc::operator=(TargetProc&& o) noexcept {
  if (this != &o) {
    this->~TargetProc();
    new (this) TargetProc(std::move(o));
  }
  return *this;
}

TargetProc::~TargetProc() {
  if (pid_ > 0) {
    kill(pid_, SIGCONT);  // should a test have left it stopped
    (void)Call("exit");
    int st;
    waitpid(pid_, &st, 0);
  }
  if (to_ >= 0) close(to_);
  if (from_ >= 0) close(from_);
  pid_ = to_ = from_ = -1;
}

bool TargetProc::Stop() {
  if (pid_ <= 0 || kill(pid_, SIGSTOP) != 0) return false;
  // kill() returns before the child stops: wait for state T in /proc, for
  // every thread (the agent's serve on threads of their own).
  const auto stopped = [&] {
    const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
    for (const auto& t : std::filesystem::directory_iterator(tasks)) {
      std::ifstream in(t.path() / "stat");
      std::string line;
      std::getline(in, line);
      const size_t paren = line.rfind(')');
      if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'T')
        return false;
    }
    return true;
  };
  for (int i = 0; i < 1000; ++i) {
    if (stopped()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(pid_, SIGCONT);  // not stopped in time: left running
  return false;
}

void TargetProc::Continue() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

void TargetProc::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

std::string TargetProc::Call(const std::string& line) {
  if (pid_ <= 0) return "";
  std::string l = line + "\n";
  if (write(to_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) return "";
  std::string out;
  char c;
  while (read(from_, &c, 1) == 1) {
    if (c == '\n') return out;
    out += c;
  }
  return "";
}

namespace {

// One command of the target loop; writes the reply to `out`.
void Serve(Agent& agent, int device, const std::string& line, std::ostream& out) {
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  uint64_t a = 0, b = 0, c = 0;
  if (cmd == "alloc" || cmd == "allocro") {  // <bytes>; allocro: registered read-only
    in >> a;
    void* p = nullptr;
    if (cudaMalloc(&p, a) != cudaSuccess || !ZeroDevice(p, a)) {
      (void)cudaGetLastError();
      if (p != nullptr) cudaFree(p);
      p = nullptr;  // registering null fails: the test sees "0 0"
    }
    auto r = agent.RegisterMemory(p, a, MemoryKind::kCuda, device,
                                  cmd == "allocro" ? Access::kReadOnly : Access::kReadWrite);
    out << reinterpret_cast<uint64_t>(p) << " " << (r.ok() ? r->value : 0);
  } else if (cmd == "vmmalloc") {  // <bytes> <parts> <handle types>: VMM memory, registered
    in >> a >> b >> c;
    std::string error;
    void* p = VmmAlloc(device, a, static_cast<int>(b), static_cast<unsigned>(c), &error);
    if (p != nullptr && !ZeroDevice(p, a)) {
      VmmFree(p);
      p = nullptr;
      error = "zeroing the VMM range failed";
    }
    auto r = p ? agent.RegisterMemory(p, a, MemoryKind::kCuda, device)
               : Result<RegionId>(Status::Backend(error));
    out << reinterpret_cast<uint64_t>(p) << " " << (r.ok() ? r->value : 0);
    if (!r.ok()) out << " " << r.status().ToString();  // why, for the test's message
  } else if (cmd == "reg") {  // <addr> <bytes>: registers memory again (after dereg)
    in >> a >> b;
    auto r = agent.RegisterMemory(reinterpret_cast<void*>(a), b, MemoryKind::kCuda, device);
    out << (r.ok() ? r->value : 0);
  } else if (cmd == "ipc") {  // the allocation's legacy IPC handle (benchmark probes)
    in >> a;
    cudaIpcMemHandle_t h{};
    cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(a));
    out << (e == cudaSuccess ? Hex(std::string(reinterpret_cast<const char*>(&h), sizeof(h))) : "-");
  } else if (cmd == "meta") {
    out << Hex(agent.ExportMetadata().value());
  } else if (cmd == "fill" || cmd == "check" || cmd == "memset" || cmd == "checkbyte") {
    in >> a >> b >> c;
    void* p = reinterpret_cast<void*>(a);
    if (cmd == "fill") FillDevice(p, b, c), out << "ok";
    if (cmd == "check") out << CheckDevice(p, b, c);
    if (cmd == "memset") cudaMemset(p, static_cast<int>(c), b), cudaDeviceSynchronize(), out << "ok";
    if (cmd == "checkbyte") {
      std::vector<uint8_t> h(b);
      cudaMemcpy(h.data(), p, b, cudaMemcpyDefault);
      int64_t bad = -1;
      for (uint64_t i = 0; i < b && bad < 0; ++i)
        if (h[i] != static_cast<uint8_t>(c)) bad = static_cast<int64_t>(i);
      out << bad;
    }
  } else if (cmd == "free") {  // <addr>: cudaFree (deregister first)
    in >> a;
    out << static_cast<int>(cudaFree(reinterpret_cast<void*>(a)));
  } else if (cmd == "meminfo") {  // the device's free bytes
    size_t free = 0, total = 0;
    cudaDeviceSynchronize();
    out << (cudaMemGetInfo(&free, &total) == cudaSuccess ? free : 0);
  } else if (cmd == "dereg") {
    in >> a;
    out << static_cast<int>(agent.DeregisterMemory(RegionId{a}).code());
  } else if (cmd == "notifcheck") {  // waits for one notification, then checks the data at once
    in >> a >> b >> c;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::vector<Notification> got;
    while (got.empty() && std::chrono::steady_clock::now() < until) got = agent.TakeNotifications();
    if (got.empty()) {
      out << "none -3";
      return;
    }
    int64_t bad = b == 0 ? -1 : CheckDevice(reinterpret_cast<void*>(a), b, c);
    out << got[0].bytes << " " << bad;
  } else {
    out << "?";
  }
}

}  // namespace

int RunTarget(int device, const std::string& name, const std::string& transport) {
  cudaSetDevice(device);
  AgentOptions o;
  o.name = name;
  o.transports = {transport};
  auto agent = Agent::Create(o);
  if (!agent.ok()) return 2;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "exit") break;
    std::ostringstream out;
    Serve(**agent, device, line, out);
    std::cout << out.str() << "\n" << std::flush;
  }
  return 0;
}

int MaybeRunTarget(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--kvlane-cuda-target") == 0)
    return RunTarget(std::atoi(argv[2]), argc >= 4 ? argv[3] : "target",
                     argc >= 5 ? argv[4] : "cuda");
  return -1;
}

}  // namespace kvlane::test
