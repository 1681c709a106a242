#include "run_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "control_channel.h"
#include "control_secret.h"
#include "kvlane/options.h"
#include "path_choice.h"
#include "slurm.h"

namespace kvbench {
namespace {

std::string Join(const std::vector<uint64_t>& v) {
  std::string s;
  for (uint64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

kvlane::Status ValidateChoices(const RunConfig& c) {
  static const std::vector<std::string> kTransports = {"auto", "local", "shm", "tcp", "cuda"};
  if (std::find(kTransports.begin(), kTransports.end(), c.transport) == kTransports.end()) {
    return kvlane::Status::InvalidArgument("unknown transport '" + c.transport + "'");
  }
  KVLANE_RETURN_IF_ERROR(Workload::Make(c.grid.workload).status());  // before any rank starts
  KVLANE_RETURN_IF_ERROR(CheckTransportMemory(c.transport, c.memory));
  KVLANE_RETURN_IF_ERROR(kvlane::ParseStagingCopy(c.staging_copy).status());
  for (auto op = c.ops.begin(); op != c.ops.end(); ++op) {
    if (*op != "pull" && *op != "push") {
      return kvlane::Status::InvalidArgument("unknown op '" + *op + "' (pull, push)");
    }
    if (std::find(c.ops.begin(), op, *op) != op) {  // it would measure every row twice
      return kvlane::Status::InvalidArgument("--ops names " + *op + " twice");
    }
  }
  if (c.policy != "independent" && c.policy != "global-fifo") {
    return kvlane::Status::InvalidArgument("unknown policy '" + c.policy +
                                           "' (independent, global-fifo)");
  }
  if (c.rank < -1 || c.rank > 1 || (c.rank >= 0 && c.peer.empty())) {
    return kvlane::Status::InvalidArgument("--rank is 0 or 1 and needs --peer HOST:PORT");
  }
  if (c.rank < 0 && !c.peer.empty()) {  // Slurm sets the rank (ApplySlurm)
    return kvlane::Status::InvalidArgument(
        "--peer " + c.peer +
        " needs --rank 0|1 (without --rank, both ranks are spawned on this host)");
  }
  if (c.rank >= 0 && c.transport == "local") {
    return kvlane::Status::InvalidArgument(
        "--transport local moves bytes within one process: it runs both ranks itself, without "
        "--rank (use shm for ranks on one host, tcp across hosts)");
  }
  if (!c.peer.empty()) {
    std::string host;
    uint16_t port = 0;
    KVLANE_RETURN_IF_ERROR(SplitHostPort(c.peer, &host, &port));
    if (port == 0) {
      return kvlane::Status::InvalidArgument("--peer " + c.peer +
                                             ": the port rank 0 listens on, 1..65535 (not 0)");
    }
  }
  if (c.control_timeout_ms.count() <= 0) {
    return kvlane::Status::InvalidArgument("--control-timeout must be positive");
  }
  // Far past any wait a run needs, and far from where time arithmetic overflows.
  constexpr std::chrono::milliseconds kMaxControlTimeout = std::chrono::hours(24 * 7);
  if (c.control_timeout_ms > kMaxControlTimeout) {
    return kvlane::Status::InvalidArgument(
        fmt::format("--control-timeout is at most 7 days ({}ms); got {}ms",
                    kMaxControlTimeout.count(), c.control_timeout_ms.count()));
  }
  if (c.device < -1) {
    return kvlane::Status::InvalidArgument("--device is a GPU index, or -1 for the default");
  }
  if (c.case_name.find('/') != std::string::npos || c.case_name == "." || c.case_name == "..") {
    return kvlane::Status::InvalidArgument("--case '" + c.case_name +
                                           "' names a file in --out: no '/'");
  }
  if (c.lanes < 0 || c.lanes > 64) {
    return kvlane::Status::InvalidArgument("--lanes is 1..64, or 0 for the engine's default; got " +
                                           std::to_string(c.lanes));
  }
  return kvlane::Status::Ok();
}

// Bursts of a row, warm-up included, at most (and each sampling flag): a row's
// burst count stays an int, and a typo cannot ask for days of one row.
constexpr int kMaxSampling = 1000000;

// Sampling flag `flag` as given, else the preset's `preset`; a value below `min` is
// refused (no value stands for "the preset's": leaving the flag out does).
kvlane::Result<int> Sampling(const char* flag, const std::optional<int>& given, int preset,
                             int min) {
  if (!given) return preset;
  if (*given < min || *given > kMaxSampling) {
    return kvlane::Status::InvalidArgument(
        std::string(flag) + " " + std::to_string(*given) + ": need at least " +
        std::to_string(min) + " and at most " + std::to_string(kMaxSampling) +
        " (leave it out for the preset's " + std::to_string(preset) + ")");
  }
  return *given;
}

}  // namespace

uint64_t DevicePoolBudget(uint64_t default_budget, uint64_t free_bytes, int ranks_on_device) {
  if (free_bytes == 0) return default_budget;
  uint64_t cap = free_bytes / 5 * 4 / std::max(ranks_on_device, 1);
  return std::min(default_budget, cap);
}

kvlane::Result<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  if (digits == 0 || digits > 9) {
    return kvlane::Status::InvalidArgument("cannot read '" + text + "' as a duration");
  }
  int64_t v = std::stoll(text.substr(0, digits));
  if (unit.empty() || unit == "s") return std::chrono::milliseconds(v * 1000);
  if (unit == "ms") return std::chrono::milliseconds(v);
  if (unit == "m") return std::chrono::milliseconds(v * 60000);
  return kvlane::Status::InvalidArgument("unknown duration unit in '" + text + "' (ms, s, m)");
}

kvlane::Status RunConfig::Resolve() {
  KVLANE_RETURN_IF_ERROR(ApplySlurm(this));  // srun -n 2: rank and peer from Slurm
  KVLANE_ASSIGN_OR_RETURN(pool_budget_auto, ApplyGridDefaults(&grid, &plan_defaults));
  KVLANE_RETURN_IF_ERROR(ResolvePlanOptions(grid, plan_defaults).status());  // the budgets
  const GridPreset p = GridPresetNamed(grid.preset).value();
  KVLANE_ASSIGN_OR_RETURN(warmup, Sampling("--warmup", warmup_flag, p.warmup, 0));
  KVLANE_ASSIGN_OR_RETURN(samples, Sampling("--samples", samples_flag, p.samples, 1));
  KVLANE_ASSIGN_OR_RETURN(trials, Sampling("--trials", trials_flag, p.trials, 1));
  if (int64_t{warmup} + int64_t{samples} * trials > kMaxSampling) {
    return kvlane::Status::InvalidArgument(
        "--warmup + --samples x --trials: " + std::to_string(warmup) + " + " +
        std::to_string(samples) + " x " + std::to_string(trials) + " bursts per row, at most " +
        std::to_string(kMaxSampling));
  }
  // The ladders and budgets, before any rank starts (BuildPlan checks them again).
  KVLANE_RETURN_IF_ERROR(ResolvePlanOptions(grid, plan_defaults)->Validate());
  const char* env = std::getenv("KVBENCH_CONTROL_TIMEOUT");
  const std::string timeout = control_timeout.empty() && env ? env : control_timeout;
  if (!timeout.empty()) {
    auto ms = ParseDuration(timeout);
    if (!ms.ok()) {  // names where the value came from: the flag, else the environment
      return kvlane::Status::InvalidArgument(
          std::string(control_timeout.empty() ? "KVBENCH_CONTROL_TIMEOUT" : "--control-timeout") +
          ": " + ms.status().message());
    }
    control_timeout_ms = ms.value();
  }
  KVLANE_RETURN_IF_ERROR(ResolveSecret());
  KVLANE_RETURN_IF_ERROR(ResolveListener());
  auto every = ParseDuration(progress_every);
  if (!every.ok()) {
    return kvlane::Status::InvalidArgument("--progress-every: " + every.status().message());
  }
  progress_every_ms = every.value();
  return ValidateChoices(*this);
}

kvlane::Status RunConfig::ResolveListener() {
  const char* value = std::getenv(kSpawnedListenFdEnv);
  if (value == nullptr) return kvlane::Status::Ok();
  const std::string text = value;
  unsetenv(kSpawnedListenFdEnv);                           // for nothing this process starts
  if (!spawned || rank != 0) return kvlane::Status::Ok();  // only a launcher's rank 0 takes one
  char* end = nullptr;
  errno = 0;
  const long fd = std::strtol(text.c_str(), &end, 10);
  // 0..2 are the standard streams, never the listener.
  if (text.empty() || *end != '\0' || errno != 0 || fd < 3 || fd > INT32_MAX) {
    return kvlane::Status::InvalidArgument(std::string(kSpawnedListenFdEnv) + " is malformed");
  }
  listen_fd = static_cast<int>(fd);
  return kvlane::Status::Ok();
}

kvlane::Status RunConfig::ResolveSecret() {
  if (spawned) {  // the launcher's, whatever the flags or environment say
    char* hex = std::getenv(kSpawnedSecretEnv);
    if (hex == nullptr) {  // a rank spawned by a kvbench launcher always has one
      return kvlane::Status::InvalidArgument(std::string("--spawned is the launcher's: no ") +
                                             kSpawnedSecretEnv + " came with it");
    }
    const bool taken = FromHex(hex, &secret) && secret.size() >= kMinSecretBytes;
    // Wiped in place: /proc/<pid>/environ shows the environment block the process
    // started with, which unsetenv alone leaves as it was.
    explicit_bzero(hex, std::strlen(hex));
    unsetenv(kSpawnedSecretEnv);
    if (!taken) {
      secret.clear();
      return kvlane::Status::InvalidArgument(std::string(kSpawnedSecretEnv) + " is malformed");
    }
    return kvlane::Status::Ok();
  }
  const char* env = std::getenv("KVBENCH_SECRET_FILE");
  const std::string file = secret_file.empty() && env ? env : secret_file;
  if (file.empty()) return kvlane::Status::Ok();
  auto read = ReadSecretFile(file);
  if (!read.ok()) {  // names where the path came from when not the flag
    return kvlane::Status::InvalidArgument(
        (secret_file.empty() ? "KVBENCH_SECRET_FILE=" : "--secret-file ") +
        read.status().message());
  }
  secret = std::move(read).value();
  return kvlane::Status::Ok();
}

std::vector<std::string> RunConfig::ForwardArgs() const {
  std::vector<std::string> a = {"--workload",
                                grid.workload.name,
                                "--grid",
                                grid.preset,
                                "--transport",
                                transport,
                                "--memory",
                                memory,
                                "--out",
                                out_dir,
                                "--warmup",
                                std::to_string(warmup),
                                "--samples",
                                std::to_string(samples),
                                "--trials",
                                std::to_string(trials),
                                "--listen-host",
                                listen_host,
                                "--control-timeout",
                                std::to_string(control_timeout_ms.count()) + "ms",
                                "--progress-every",
                                std::to_string(progress_every_ms.count()) + "ms",
                                "--policy",
                                policy,
                                "--staging-copy",
                                staging_copy,
                                "--lanes",
                                std::to_string(lanes),
                                "--seed",
                                std::to_string(seed),
                                "--device",
                                std::to_string(device)};
  std::string ops_list;
  for (const std::string& op : ops) ops_list += (ops_list.empty() ? "" : ",") + op;
  a.insert(a.end(), {"--ops", ops_list});
  // 0: the workload's default (the flag left out; --block takes sizes only).
  if (grid.workload.block != 0) {
    a.insert(a.end(), {"--block", std::to_string(grid.workload.block)});
  }
  if (!grid.workload.dtype.empty()) a.insert(a.end(), {"--dtype", grid.workload.dtype});
  if (!grid.isl.empty()) a.insert(a.end(), {"--isl", Join(grid.isl)});
  if (!grid.batches.empty()) a.insert(a.end(), {"--batches", Join(grid.batches)});
  if (!grid.desc_budget.empty()) a.insert(a.end(), {"--desc-budget", grid.desc_budget});
  if (!grid.pool_budget.empty() && !pool_budget_auto) {
    a.insert(a.end(), {"--pool-budget", grid.pool_budget});
  }
  if (!case_name.empty()) a.insert(a.end(), {"--case", case_name});
  if (!fault.empty()) a.insert(a.end(), {"--inject-fault", fault});
  return a;
}

void AddRunFlags(CLI::App* app, RunConfig* c) {
  AddGridFlags(app, &c->grid);
  app->add_option("--transport", c->transport,
                  "auto (tcp across hosts or for a --memory pair; on one host cuda between two "
                  "GPUs or for --memory cuda, else shm) | local | shm | tcp | cuda")
      ->capture_default_str();
  app->add_option("--memory", c->memory,
                  "where each rank's pool lives: auto (cuda for the cuda transport, else host) | "
                  "host | cuda (over cuda, or over tcp staged through pinned host buffers) for "
                  "both ranks, or TARGET,INITIATOR, e.g. cuda,host or host,cuda (tcp only: the "
                  "device side is staged through pinned host buffers)")
      ->capture_default_str();
  app->add_option("--ops", c->ops, "pull,push")->delimiter(',');
  app->add_option("--out", c->out_dir, "directory for the JSON documents")->capture_default_str();
  app->add_option("--warmup", c->warmup_flag, "warm-up bursts per row, >= 0 (quick 2, full 2)");
  app->add_option("--samples", c->samples_flag, "timed bursts per trial, >= 1 (quick 12, full 16)");
  app->add_option("--trials", c->trials_flag, "trials per row, >= 1 (quick 2, full 3)");
  // -1 inside means "no --rank" (spawn both); given, the rank is 0 or 1.
  app->add_option("--rank", c->rank, "run one rank: 0 = target (owns the pool), 1 = initiator")
      ->check(CLI::Range(0, 1));
  app->add_option("--peer", c->peer, "HOST:PORT where rank 0 listens for the control plane");
  app->add_option("--listen-host", c->listen_host,
                  "data listener bind address (tcp); auto: this rank's address on the control "
                  "connection (127.0.0.1 on one host; across hosts the interface that reaches "
                  "the other rank)")
      ->capture_default_str();
  app->add_option("--control-timeout", c->control_timeout,
                  "control-plane timeout, e.g. 300s (env KVBENCH_CONTROL_TIMEOUT; default 300s)");
  app->add_option("--secret-file", c->secret_file,
                  "a file (mode 600, 16..4096 bytes) holding a secret both ranks share: each "
                  "proves it holds it before any plan or metadata goes to the other (env "
                  "KVBENCH_SECRET_FILE; ranks spawned on one host share a fresh one)");
  app->add_option("--progress-every", c->progress_every,
                  "while a row runs longer, the initiator says every this long where it is "
                  "(its phase, the timed bursts done, the time left in it), e.g. 30s; 0: never")
      ->capture_default_str();
  app->add_option("--policy", c->policy, "independent | global-fifo")->capture_default_str();
  app->add_option("--staging-copy", c->staging_copy,
                  "tcp with --memory cuda: how device ranges reach the pinned buffers: batch "
                  "(copy engines) | each (a copy per range) | kernel (a copy kernel)")
      ->capture_default_str();
  app->add_option("--lanes", c->lanes, "data lanes per peer, 1..64 (0: engine default)");
  app->add_option("--seed", c->seed, "block-table seed")
      ->capture_default_str()
      ->check(NotNegative());
  app->add_option("--device", c->device,
                  "this rank's GPU when its pool is on one (-1: on one host rank 0 uses GPU 0, "
                  "rank 1 GPU 1 when present; across hosts GPU 0, or SLURM_LOCALID / "
                  "LOCAL_RANK modulo the visible GPUs)");
  app->add_option("--case", c->case_name,
                  "case name (default <workload>-b<block>[-<dtype>]-<transport>, then the memory "
                  "where it is not the transport's own, a staging copy other than batch, a "
                  "--policy other than independent, lanes<N> for --lanes, a --grid other than "
                  "quick, --isl and --batches ladders other than the preset's and a single "
                  "--ops: docs/METHODOLOGY.md)")
      ->check(CLI::Validator(
          [](const std::string& v) {
            return v.empty() ? std::string("--case names the document: not empty") : std::string();
          },
          "NAME"));
  app->add_option("--inject-fault", c->fault,
                  "testing only: flip-byte flips one landed byte before each verification; "
                  "ref-{target,initiator}-{setup,stream} fails that rank's socket reference "
                  "before its first byte or partway through; slow-reference and "
                  "slow-target-prepare repeat the initiator's reference, or the target's "
                  "wipe or fill before a verified burst, from the second row on until the run "
                  "is stopped; long-target-prepare repeats the target's wipe or fill of every "
                  "row for 3 of its control timeouts; silent-target-prepare keeps the target "
                  "silent for 2 of them before its wipe or fill of the first row; "
                  "stale-last-burst leaves the sources of each row's last timed burst "
                  "unfilled (holding the row's first pattern)")
      ->check(CLI::IsMember({"flip-byte", "ref-target-setup", "ref-target-stream",
                             "ref-initiator-setup", "ref-initiator-stream", "slow-reference",
                             "slow-target-prepare", "long-target-prepare", "silent-target-prepare",
                             "stale-last-burst"}))
      ->group("Testing");
  app->add_flag("--spawned", c->spawned, "set by the launcher on the ranks it spawns")
      ->group("");  // hidden: not for people to pass
}

}  // namespace kvbench
