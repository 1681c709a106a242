// RunConfig: every knob of `kvbench run`, from flags, environment and the
// embedded defaults. Plain value; thread-compatible.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "grid_flags.h"
#include "kvlane/status.h"

namespace kvbench {

struct RunConfig {
  GridFlags grid;
  std::string transport = "auto";  // auto | local | shm | tcp | cuda
  // Where each rank's pool lives: auto (cuda for the cuda transport, else host) |
  // host | cuda (the cuda transport, or tcp staging through pinned host buffers),
  // for both ranks; or a pair TARGET,INITIATOR of host and cuda, e.g. cuda,host
  // (tcp only: it stages the device side). ParseMemory in path_choice.h.
  std::string memory = "auto";
  std::vector<std::string> ops = {"pull", "push"};
  std::string out_dir = "kvbench-out";
  // --warmup, --samples, --trials as given; one left out takes the preset's (Resolve).
  std::optional<int> warmup_flag, samples_flag, trials_flag;
  int rank = -1;  // -1: spawn both ranks on this host
  // Set by the launcher on the ranks it spawns (hidden --spawned): such a rank ignores
  // a second stop signal, which its launcher answers by killing both ranks.
  bool spawned = false;
  std::string peer;  // HOST:PORT of rank 0's control listener (both ranks pass the same)
  // Rank 0 of a launcher: the control listener the launcher opened on `peer` before
  // starting the ranks, so that no other process can take the port in between
  // (threads: handed over; spawned: inherited, its number in kSpawnedListenFdEnv).
  // -1: the rank binds `peer` itself. The session takes it over when it listens.
  int listen_fd = -1;
  // The data listener's bind address (tcp); "auto": this rank's address on the
  // control connection (127.0.0.1 for ranks spawned on one host; across hosts
  // the interface that reaches the other rank).
  std::string listen_host = "auto";
  std::string control_timeout;         // empty: env KVBENCH_CONTROL_TIMEOUT, else 300s
  // A file holding the ranks' shared control secret (control_secret.h); empty: env
  // KVBENCH_SECRET_FILE, else none. Never forwarded: the launcher hands the secret
  // itself to the ranks it spawns (kSpawnedSecretEnv).
  std::string secret_file;
  std::string policy = "independent";  // independent | global-fifo
  std::string staging_copy = "batch";  // batch | each | kernel (AgentOptions::staging_copy)
  int lanes = 0;                       // data lanes per peer; 0: the engine default
  int device = -1;  // this rank's GPU when its pool is on one; -1: DefaultDevice (path_choice.h)
  uint64_t seed = 1;
  std::string case_name;  // empty: DefaultCaseName (case_name.h), e.g. "kv-dsv4-b256-shm"
  std::string fault;      // testing: "flip-byte" corrupts each verified burst; "ref-<role>-setup"
                          // or "ref-<role>-stream" fails that rank's socket reference;
                          // "slow-reference" (the initiator's reference) and
                          // "slow-target-prepare" (the target's wipe or fill of a row's
                          // verified burst) repeat, from the second row on, until a stop
                          // interrupts them; "long-target-prepare" repeats the target's
                          // wipe or fill of every row for 3 of its control timeouts;
                          // "silent-target-prepare" keeps the target silent for 2 of
                          // them before its wipe or fill of the first row

  // Filled by Resolve():
  int warmup = 0, samples = 0, trials = 0;  // the flags', else the preset's (--grid)
  PlanOptions plan_defaults;
  // No --pool-budget nor KVBENCH_POOL_BUDGET: derived from free memory where the pool
  // lives (host MemAvailable here; the GPU's free memory once the session knows the
  // pool is on a GPU), and the two ranks settle on the smaller. Never forwarded to
  // spawned ranks, which derive their own.
  bool pool_budget_auto = false;
  std::chrono::milliseconds control_timeout_ms{300000};
  // The control secret's bytes (empty: none): read from secret_file, or in a
  // spawned rank from kSpawnedSecretEnv (required there), which Resolve then wipes
  // in place and unsets. Never written anywhere (documents record only whether
  // there was one).
  std::string secret;
  // --progress-every: how often the initiator says where a long row is (0: never).
  std::string progress_every = "10s";
  std::chrono::milliseconds progress_every_ms{10000};

  // Applies the preset, environment and the free-memory pool cap; validates (a
  // negative --warmup, or --samples or --trials below 1, is InvalidArgument naming it).
  kvlane::Status Resolve();
  // The control secret (part of Resolve): see `secret`.
  kvlane::Status ResolveSecret();
  // The inherited control listener (part of Resolve): see `listen_fd`.
  kvlane::Status ResolveListener();
  // The arguments that reproduce this config (for spawned ranks).
  std::vector<std::string> ForwardArgs() const;
};

void AddRunFlags(CLI::App* app, RunConfig* config);

// The environment variable through which the launcher hands the ranks it spawns
// their control secret (hex): its own --secret-file's, else a fresh random one.
inline constexpr char kSpawnedSecretEnv[] = "KVBENCH_SPAWNED_SECRET";
// The environment variable through which the launcher tells the rank 0 it spawns
// which inherited descriptor is its control listener (RunConfig::listen_fd).
inline constexpr char kSpawnedListenFdEnv[] = "KVBENCH_SPAWNED_LISTEN_FD";

// The automatic pool budget of a rank whose pool is on a GPU with `free_bytes`
// free (cudaMemGetInfo): 80 % of it, the rest left to the CUDA context and the
// engine's device tables, split between the `ranks_on_device` ranks on that GPU,
// and no more than `default_budget`. `default_budget` when free_bytes is 0 (unknown).
uint64_t DevicePoolBudget(uint64_t default_budget, uint64_t free_bytes, int ranks_on_device);

// Parses "300", "300s", "1500ms", "5m" into milliseconds.
kvlane::Result<std::chrono::milliseconds> ParseDuration(const std::string& text);

}  // namespace kvbench
