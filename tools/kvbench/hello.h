// The ranks' hello: the first message each rank sends on the control connection,
// naming its build and control protocol, its rank, host and pool memory. The
// peer's hello is untrusted input: any field may be missing or of another type.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "document.h"
#include "kvlane/status.h"

namespace kvbench {

// The version of the messages the ranks exchange, in each rank's hello: raise it
// when a message changes meaning, so that ranks of two builds refuse each other at
// the handshake instead of misreading each other later. 2: the target sends 'busy'
// while it prepares a row, the plan carries the boot id and MemAvailable, the row
// carries the initiator's control timeout. The plan's "mem_available" has since
// become the host memory bound that applies (MemAvailable, or a cgroup's headroom
// where smaller: host_memory.h), with "mem_bound" saying which: no bump, as a
// peer that reads it as MemAvailable only checks against less memory. The plan has
// since carried "host_memory" too (MemAvailable and the cgroup's room apart, with the
// cgroup's identity: host_pools.h): no bump, as "mem_available" and "mem_bound" keep
// their meaning for builds before it, and a rank whose peer sends no "host_memory"
// decides as such a build does. "host_memory" has since listed every limited cgroup
// ("cgroups"): no bump, as a rank whose peer sends no list compares the tightest
// cgroups alone, as that peer does. The hello has since carried "nonce" and "auth", and
// with a control secret a "proof" message follows it (control_secret.h): no bump,
// as ranks without a secret exchange what they did before (the new fields unread
// by an older build), and a rank with one refuses a peer without, whatever its
// build, naming the flag. 3: with a control secret, every message after the proofs
// carries a MAC (ControlChannel::Seal), which a build of 2 would read as the next
// message's length. 4: each row is verified twice (a second "row" exchange, its
// epoch with bit 63 set, for the last timed burst), which a build of 3 would
// serve with its injected faults applied to it.
inline constexpr int64_t kControlProtocol = 4;

// How long rank 0 gives a connection to say its hello (at most what is left of
// its control timeout) before it drops it: a kvbench rank sends its own at once.
// Rank 1 waits its whole control timeout for rank 0's (rank 0 may first be
// dropping a stray connection).
inline constexpr std::chrono::milliseconds kHelloWait{10000};

// The longest hello either rank takes (a stray's "length" could ask for far more).
inline constexpr uint32_t kMaxHelloBytes = 64u << 10;

// Checks the peer's hello `m` against this rank (`my_rank`: 0 or 1): the same
// protocol, the other rank. Fills `peer` from it (role, host, devices: empty where
// missing or not strings). kInvalidArgument naming both builds, or both ranks.
kvlane::Status ReadHello(int my_rank, const nlohmann::json& m, RankInfo* peer);

// The error of a handshake whose hello did not come (`cause`). On rank 0, what
// connected sent none: said as such. On rank 1, a reply that is no
// kvbench message, or another message than a hello, most likely comes from a
// --peer port of another service or a kvbench of another build: says so beside the
// cause. A closed connection may also be a kvbench rank that failed: said as both.
// A timeout (a listener that accepted and says nothing: a kvbench rank sends its
// hello as soon as it connects) says so too. Other causes (a socket error) are
// returned as they are.
kvlane::Status NotAPeer(int my_rank, const std::string& peer, const kvlane::Status& cause);

}  // namespace kvbench
