// Creates two agents from the installed headers and library and moves 4 KiB
// between them; prints "ok" and exits 0 on success.
#include <kvlane/kvlane.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  using namespace kvlane;
  AgentOptions o;
  o.transports = {"local"};
  o.name = "consumer-a";
  auto a = Agent::Create(o);
  o.name = "consumer-b";
  auto b = Agent::Create(o);
  if (!a.ok() || !b.ok()) return std::puts("agent create failed"), 1;
  std::vector<char> src(4096, 'k'), dst(4096, 0);
  if (!a.value()->RegisterMemory(src.data(), src.size()).ok()) return 2;
  if (!b.value()->RegisterMemory(dst.data(), dst.size()).ok()) return 3;
  auto peer = a.value()->LoadPeer(b.value()->ExportMetadata().value());
  if (!peer.ok()) return 4;
  DescList l, r;
  l.Add(src.data(), src.size());
  r.Add(dst.data(), dst.size());
  auto h = a.value()->MakeTransfer(Op::kWrite, a.value()->PrepareLocal(l).value(), {},
                                   a.value()->PrepareRemote(peer.value(), r).value(), {});
  if (!h.ok() || a.value()->Post(&h.value()).is_error()) return 5;
  if (!a.value()->Wait(h.value(), std::chrono::seconds(10)).ok()) return 6;
  if (std::memcmp(src.data(), dst.data(), src.size()) != 0) return 7;
  std::printf("ok %s\n", VersionString().c_str());
  return 0;
}
