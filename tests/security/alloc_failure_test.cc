// What a server thread calls for a remote peer, under allocation failure: each
// allocation the call makes is failed in turn (this binary replaces the global
// operator new to do it). PeerConnLimit::Acquire neither throws nor leaves a
// count behind, so the peer's slots stay free; NotifQueue::Push neither throws
// nor queues or charges anything, and TakeAll loses nothing. A server thread that
// runs out of memory drops its connection, not the process. The replacement also
// counts the heap each thread holds, to check what a full NotifQueue really holds.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "test_util.h"
#include "transport/notif_queue.h"
#include "transport/peer_conn_limit.h"

namespace {

// The allocation on this thread that fails next: 0 the next one, -1 none.
thread_local int fail_countdown = -1;
// Every allocation of at least this many bytes fails, on every thread but the
// ones marked spared.
std::atomic<std::size_t> fail_at_least{SIZE_MAX};
thread_local bool spared = false;
// Bytes malloc holds for the blocks this thread allocated and has not freed
// (usable size and 8-byte header each; only meaningful while one thread both
// allocates and frees), and the most since HeapMeter last reset it.
thread_local int64_t live_bytes = 0;
thread_local int64_t peak_bytes = 0;

int64_t HeldBy(void* p) { return static_cast<int64_t>(malloc_usable_size(p) + sizeof(size_t)); }

void* Allocate(std::size_t n) {
  if (fail_countdown >= 0 && fail_countdown-- == 0) throw std::bad_alloc();
  if (!spared && n >= fail_at_least.load(std::memory_order_relaxed)) throw std::bad_alloc();
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  live_bytes += HeldBy(p);
  peak_bytes = std::max(peak_bytes, live_bytes);
  return p;
}

void Free(void* p) noexcept {
  if (p != nullptr) live_bytes -= HeldBy(p);
  std::free(p);
}

}  // namespace

// Every form a sanitizer's runtime would otherwise pair with its own allocator.
void* operator new(std::size_t n) { return Allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return Allocate(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { Free(p); }
void operator delete(void* p, std::size_t) noexcept { Free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { Free(p); }

namespace kvlane::core {
namespace {

// The `k`-th allocation of this thread from now fails (once) until destroyed.
class FailAllocation {
 public:
  explicit FailAllocation(int k) { fail_countdown = k; }
  ~FailAllocation() { fail_countdown = -1; }
  // Whether the failure was injected.
  bool fired() const { return fail_countdown == -1; }
};

// What one call returned with this thread's `k`-th allocation failing (empty,
// and a test failure, when it threw), and whether that allocation came.
template <typename Call>
struct FailedCall {
  std::optional<std::invoke_result_t<Call>> result;
  bool fired = false;
};

template <typename Call>
FailedCall<Call> CallFailingAllocation(int k, Call call) {
  FailedCall<Call> out;
  FailAllocation fail(k);
  try {
    out.result.emplace(call());
  } catch (const std::bad_alloc&) {
    ADD_FAILURE() << "allocation " << k << " threw out of the call";
  }
  out.fired = fail.fired();
  return out;
}

TEST(PeerConnLimitAlloc, AllocationFailureNeitherThrowsNorLeaksACount) {
  const std::string peer(64, 'p');  // past the string's own buffer: copies allocate
  bool completed = false;
  for (int k = 0; !completed && k < 100; ++k) {
    PeerConnLimit limit(1);
    auto [got, fired] = CallFailingAllocation(k, [&] { return limit.Acquire(peer); });
    completed = !fired;
    if (completed) {
      ASSERT_TRUE(got.has_value() && got->ok()) << k;
      continue;
    }
    if (got.has_value()) EXPECT_EQ(got->status().code(), Code::kBackend) << k;
    Result<PeerConnLimit::Slot> again = limit.Acquire(peer);  // the peer's one slot is free
    EXPECT_TRUE(again.ok()) << "allocation " << k << ": " << again.status().ToString();
  }
  EXPECT_TRUE(completed);
}

// Fills `q` with notifications from distinct names of 40 bytes (past the
// string's own buffer) until one is refused; returns how many fit.
int FillUntilRefused(NotifQueue& q) {
  for (int i = 0;; ++i) {
    if (!q.Push({std::string(40, 'a' + i % 26) + std::to_string(i), "x"}).ok()) return i;
  }
}

// A queue holding `n` notifications, each from its own name.
void Prefill(NotifQueue& q, int n) {
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(q.Push({"held-peer-name-past-the-small-buffer-" + std::to_string(i), "x"}).ok());
}

// What `peer` is charged in `q` (whose share is `max`), as the refusal of a
// notification larger than any share reports it.
uint64_t ChargedTo(NotifQueue& q, const std::string& peer, uint64_t max) {
  const std::string message = q.Push({peer, std::string(max, 'x')}).message();
  const size_t at = message.find("holds ");
  EXPECT_NE(at, std::string::npos) << message;
  return at == std::string::npos ? 0 : std::stoull(message.substr(at + 6));
}

// Each allocation of one Push failed in turn, into a queue that holds `prefill`
// notifications: the name's node (and key, and a larger bucket array at some
// sizes), and at some sizes a chunk of the queue's deque and a larger map.
void PushFailingEachAllocation(int prefill) {
  SCOPED_TRACE("prefill " + std::to_string(prefill));
  constexpr uint64_t kMax = 32 << 10;
  const std::string fresh_name(40, 'n');  // no name FillUntilRefused uses
  const Notification fresh{fresh_name, std::string(100, 'p')};
  // What `fresh` is charged as its name's first: its name's node too (payload
  // and name on the heap: 128 and 64 bytes).
  const uint64_t fresh_cost = NotifQueue::Cost(fresh) + NotifQueue::NameCost(fresh_name);
  EXPECT_EQ(fresh_cost,
            128 + 64 + NotifQueue::kOverheadBytes + NotifQueue::kNameOverheadBytes + 40);
  int room = 0;  // how many fit after the prefill and `fresh` in a queue that saw no failure
  {
    NotifQueue q(kMax, kMax);
    Prefill(q, prefill);
    ASSERT_TRUE(q.Push(fresh).ok());
    room = FillUntilRefused(q);
  }
  ASSERT_GT(room, 2);
  bool completed = false;
  for (int k = 0; !completed && k < 100; ++k) {
    NotifQueue q(kMax, kMax);
    Prefill(q, prefill);
    Notification copy = fresh;  // made before the failure
    auto [got, fired] = CallFailingAllocation(k, [&] { return q.Push(std::move(copy)); });
    completed = !fired;
    if (completed) {
      ASSERT_TRUE(got.has_value() && got->ok()) << k;
      continue;
    }
    if (got.has_value()) EXPECT_EQ(got->code(), Code::kBackend) << k;
    // Nothing of the failed push stayed: pushed again, it pays for its name's
    // node (none was left), as many more fit as in a queue that saw no failure
    // (no charge left), and it is queued once.
    ASSERT_TRUE(q.Push(fresh).ok()) << k;
    EXPECT_EQ(ChargedTo(q, fresh_name, kMax), fresh_cost) << "allocation " << k << " left a node";
    EXPECT_EQ(FillUntilRefused(q), room) << "allocation " << k << " left a charge";
    std::vector<Notification> all = q.TakeAll();
    EXPECT_EQ(all.size(), static_cast<size_t>(prefill + 1 + room)) << "allocation " << k;
    EXPECT_EQ(std::count_if(all.begin(), all.end(),
                            [&](const Notification& n) { return n.peer == fresh_name; }),
              1)
        << "allocation " << k << " queued the failed push";
  }
  EXPECT_TRUE(completed);
}

// Every size up to 41 (with libstdc++ the deque takes a chunk each 8, from the
// 8th, and its first larger map at the 40th).
TEST(NotifQueueAlloc, AllocationFailureNeitherThrowsNorQueuesNorCharges) {
  for (int prefill = 0; prefill <= 41; ++prefill) PushFailingEachAllocation(prefill);
}

// Each allocation of TakeAll failed in turn: it returns none, and all stay
// queued and charged, in order, for the next call.
TEST(NotifQueueAlloc, AllocationFailureInTakeAllLosesNothing) {
  constexpr uint64_t kMax = 32 << 10;
  constexpr int kHeld = 20;
  int room = 0;  // how many more fit after kHeld
  {
    NotifQueue q(kMax, kMax);
    Prefill(q, kHeld);
    room = FillUntilRefused(q);
  }
  bool completed = false;
  for (int k = 0; !completed && k < 100; ++k) {
    NotifQueue q(kMax, kMax);
    Prefill(q, kHeld);
    auto [got, fired] = CallFailingAllocation(k, [&] { return q.TakeAll(); });
    ASSERT_TRUE(got.has_value()) << k;
    completed = !fired;
    if (completed) {
      EXPECT_EQ(got->size(), static_cast<size_t>(kHeld));
      continue;
    }
    EXPECT_TRUE(got->empty()) << "allocation " << k;
    EXPECT_EQ(FillUntilRefused(q), room) << "allocation " << k << " freed a charge";
    std::vector<Notification> all = q.TakeAll();
    ASSERT_EQ(all.size(), static_cast<size_t>(kHeld + room)) << "allocation " << k;
    for (int i = 0; i < kHeld; ++i)
      EXPECT_EQ(all[i].peer, "held-peer-name-past-the-small-buffer-" + std::to_string(i));
  }
  EXPECT_TRUE(completed);
}

// The heap this thread holds beyond what it held when the meter was made, now
// and at most since.
class HeapMeter {
 public:
  HeapMeter() : base_(live_bytes) { peak_bytes = live_bytes; }
  int64_t live() const { return live_bytes - base_; }
  int64_t peak() const { return peak_bytes - base_; }

 private:
  const int64_t base_;
};

// A queue filled with copies of `n` (from one name) until one is refused holds
// at most 10% (and 8 KiB) more heap than its bound, at the end and at any moment
// while filling: each slot, and each payload or name too long for its string's
// own buffer, is charged for what it costs. 4097 fit, just past a power of two,
// where an array that doubles holds twice its elements (three times while it
// grows).
void ExpectHeapWithinTheBound(const Notification& n) {
  constexpr int kFit = 4097;
  const uint64_t max_bytes = NotifQueue::NameCost(n.peer) + kFit * NotifQueue::Cost(n);
  const double limit = static_cast<double>(max_bytes) * 1.10 + 8192;
  HeapMeter meter;
  int64_t held = 0;
  {
    NotifQueue q(max_bytes, max_bytes);
    int queued = 0;
    while (q.Push(n).ok()) ++queued;
    ASSERT_EQ(queued, kFit);
    held = meter.live();
  }
  std::printf(
      "%zu-byte payloads from a %zu-byte name, bound %llu bytes: queue held %lld "
      "(%.2fx), at most %lld (%.2fx)\n",
      n.bytes.size(), n.peer.size(), static_cast<unsigned long long>(max_bytes),
      static_cast<long long>(held), static_cast<double>(held) / max_bytes,
      static_cast<long long>(meter.peak()), static_cast<double>(meter.peak()) / max_bytes);
  EXPECT_LE(held, limit);
  EXPECT_LE(meter.peak(), limit);
}

// The tiniest notifications: no payload, a 1-byte name.
TEST(NotifQueueAlloc, HeapHeldStaysWithinTheBound) { ExpectHeapWithinTheBound({"n", ""}); }

// Payloads (and names) of 16 bytes, one past std::string's own buffer: each is a
// 32-byte heap block (glibc), which the charge covers (48). Charged their length
// only, they held 1.13 times the bound (1.28 with 16-byte names, 1.16 with
// 100-byte payloads from 40-byte names).
TEST(NotifQueueAlloc, HeapHeldStaysWithinTheBoundWithHeapPayloads) {
  ExpectHeapWithinTheBound({"n", std::string(16, 'p')});
  ExpectHeapWithinTheBound({std::string(16, 'n'), std::string(16, 'p')});
  ExpectHeapWithinTheBound({std::string(40, 'n'), std::string(100, 'p')});
}

// A metadata listener that announces the largest blob it may (256 MiB) and then
// sends nothing: FetchMetadata ends by its timeout having allocated about what
// arrived, not what was announced.
TEST(FetchMetadataAlloc, AnAnnouncedLengthIsNotAllocatedAhead) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(lfd, 1), 0);
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::thread listener([lfd] {
    const int c = accept(lfd, nullptr, nullptr);
    if (c < 0) return;
    char req[8];
    const uint32_t n = 256u << 20;
    if (recv(c, req, sizeof(req), MSG_WAITALL) == sizeof(req))
      (void)send(c, &n, sizeof(n), MSG_NOSIGNAL);
    char byte;
    (void)recv(c, &byte, 1, 0);  // until the fetch gives up and closes
    close(c);
  });
  std::optional<Result<std::string>> r;
  int64_t peak = 0;
  {
    HeapMeter meter;
    r.emplace(FetchMetadata("127.0.0.1:" + std::to_string(ntohs(a.sin_port)),
                            std::chrono::milliseconds(300)));
    peak = meter.peak();
  }
  listener.join();
  close(lfd);
  EXPECT_EQ(r->status().code(), Code::kTimeout) << r->status().ToString();
  EXPECT_LT(peak, int64_t{4} << 20) << "bytes allocated for a blob that never came";
}

// While alive, every allocation of at least `bytes` fails, on every thread but
// the one that made it (the test's, which sends: only the target's server
// threads are meant to fail).
class FailLargeAllocations {
 public:
  explicit FailLargeAllocations(std::size_t bytes) {
    spared = true;
    fail_at_least = bytes;
  }
  ~FailLargeAllocations() {
    fail_at_least = SIZE_MAX;
    spared = false;
  }
};

// A server thread that runs out of memory (here: the 64 KiB buffer for a
// notification's payload) drops that connection; the process, and its serving
// of other peers, goes on. Before, the bad_alloc ended the process.
TEST(ServerAlloc, OutOfMemoryOnAServerThreadDropsTheConnectionNotTheProcess) {
  for (const char* transport : {"tcp", "shm"}) {
    SCOPED_TRACE(transport);
    test::Pair p = test::MakePair(transport);
    ASSERT_TRUE(p.a && p.b);
    test::Connect(*p.a, *p.b);
    const std::string big(kMaxNotifyBytes, 'x');  // made before the failures start
    Status s;
    {
      FailLargeAllocations fail(kMaxNotifyBytes - 1024);
      s = p.a->SendNotification("b", big);
    }
    EXPECT_FALSE(s.ok()) << "the payload's buffer could not be allocated";
    // b still serves: another agent's notification arrives.
    AgentOptions o = test::OptionsFor("c", transport);
    auto c = Agent::Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    test::Connect(**c, *p.b);
    ASSERT_TRUE((*c)->SendNotification("b", big).ok());
    std::vector<Notification> got = test::TakeAtLeast(*p.b, 1, std::chrono::seconds(5));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].peer, "c");
    EXPECT_EQ(got[0].bytes, big);
  }
}

// The metadata listener runs out of memory making the blob for a client: that
// client's fetch fails, the process goes on (before, the bad_alloc ended it),
// and the next fetch gets the blob.
TEST(ServerAlloc, OutOfMemoryInTheMetadataListenerDropsTheClientNotTheProcess) {
  AgentOptions o = test::OptionsFor("m", "tcp");
  o.metadata_listen = "127.0.0.1:0";
  o.piece_bytes = 4096;
  auto m = Agent::Create(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<uint8_t> buf(1 << 20);  // 256 pieces: a blob of about 10 KiB
  ASSERT_TRUE((*m)->RegisterMemory(buf.data(), buf.size()).ok());
  const std::string where = "127.0.0.1:" + std::to_string((*m)->metadata_port());
  const std::string blob = (*m)->ExportMetadata().value();
  ASSERT_GT(blob.size(), 8192u);
  {
    FailLargeAllocations fail(8192);  // the listener's copy of the blob; not this thread's
    const Result<std::string> r = FetchMetadata(where, std::chrono::seconds(5));
    EXPECT_FALSE(r.ok()) << "the listener could not make the blob";
  }
  const Result<std::string> r = FetchMetadata(where, std::chrono::seconds(5));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), blob);
}

}  // namespace
}  // namespace kvlane::core
