#include "grid_flags.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "host_memory.h"

namespace kvbench {
namespace {

// The flag's text, else the environment variable's, else empty.
std::string FlagOrEnv(const std::string& flag, const char* env) {
  if (!flag.empty()) return flag;
  const char* v = std::getenv(env);
  return v ? std::string(v) : std::string();
}

int SuffixShift(const std::string& suffix) {
  static const std::pair<const char*, int> kUnits[] = {
      {"", 0},     {"B", 0},  {"K", 10},   {"KiB", 10}, {"M", 20},  {"MiB", 20}, {"G", 30},
      {"GiB", 30}, {"T", 40}, {"TiB", 40}, {"KB", 10},  {"MB", 20}, {"GB", 30},  {"TB", 40}};
  for (const auto& [name, shift] : kUnits) {
    if (suffix == name) return shift;
  }
  return -1;
}

const GridPreset kQuick{{8192, 32768}, {1, 2, 4}, 2, 12, 2};
const GridPreset kFull{{8192, 32768, 131072, 524288}, {1, 2, 4, 8, 16, 32}, 2, 16, 3};

}  // namespace

kvlane::Result<GridPreset> GridPresetNamed(const std::string& name) {
  if (name == "quick") return kQuick;
  if (name == "full") return kFull;
  return kvlane::Status::InvalidArgument("--grid is quick or full, not '" + name + "'");
}

kvlane::Result<bool> ApplyGridDefaults(GridFlags* flags, PlanOptions* defaults) {
  KVLANE_ASSIGN_OR_RETURN(GridPreset p, GridPresetNamed(flags->preset));
  defaults->isl = p.isl;
  defaults->batches = p.batches;
  // An empty KVBENCH_POOL_BUDGET counts as unset, as FlagOrEnv reads it (it used
  // to skip the host memory cap here and then plan with the 64 GiB default).
  if (!FlagOrEnv(flags->pool_budget, "KVBENCH_POOL_BUDGET").empty()) return false;
  // The one read of host memory (MemAvailable, or a cgroup's headroom where smaller:
  // host_memory.h) that sizes a plan, once per command (`plan`'s
  // callback, RunConfig::Resolve); the number is then carried in flags->pool_budget,
  // never read again, so a command cannot print or plan with two values. Ranks that
  // read their own (spawned, or started by hand) settle on the smaller of the two
  // before either plans (Session::SettleBudget), so both ranks plan alike. Only a
  // `plan` and a later `run`, two commands, can read different values.
  // (PoolMemory::Allocate reads it again on purpose: not to size the pool, only to
  // refuse one that no longer fits just before populating it.)
  flags->pool_budget =
      std::to_string(HostPoolBudget(defaults->pool_budget, ReadHostMemory().Bytes()));
  return true;
}

uint64_t HostPoolBudget(uint64_t default_budget, uint64_t host_bytes) {
  if (host_bytes == 0) return default_budget;  // unknown
  // Two ranks may share this host. A bound under 4 B (1: a cgroup with no room left)
  // caps at 1 B, which no pool fits, rather than at 0, which would read as unknown.
  return std::min(default_budget, std::max<uint64_t>(host_bytes / 4, 1));
}

void AddGridFlags(CLI::App* app, GridFlags* flags) {
  app->add_option("--workload", flags->workload.name, "kv-dsv4 | kv-mla | contig")
      ->capture_default_str();
  app->add_option("--block", flags->workload.block,
                  "model block in tokens (kv-dsv4/contig, default 256) or page_tokens (kv-mla: "
                  "16|64, default 64)")
      ->check(CLI::PositiveNumber);  // 0 is the spec's "default" inside, not a size to ask for
  app->add_option("--dtype", flags->workload.dtype,
                  "kv-mla element type: bf16 (default) | fp8; refused for kv-dsv4 and contig");
  app->add_option("--grid", flags->preset,
                  "quick (the embedded default: isl 8192,32768 batches 1,2,4) or full (isl "
                  "8192..524288 batches 1..32); --isl and --batches replace its ladders")
      ->capture_default_str();
  // NotNegative: CLI11 reads "-5" into a uint64_t as 2^64 - 5; Validate bounds the rest.
  app->add_option("--isl", flags->isl, "ISL ladder, comma separated (1..16777216 tokens)")
      ->delimiter(',')
      ->check(NotNegative());
  app->add_option("--batches", flags->batches, "batch ladder, comma separated (1..4096)")
      ->delimiter(',')
      ->check(NotNegative());
  app->add_option("--desc-budget", flags->desc_budget,
                  "descriptors per burst before shedding, a plain number (env "
                  "KVBENCH_DESC_BUDGET; default 65536)");
  app->add_option(
      "--pool-budget", flags->pool_budget,
      "pool bytes per rank, e.g. 64GiB (env KVBENCH_POOL_BUDGET; default 64GiB capped at 1/4 "
      "of the host memory free to this process: MemAvailable, or its cgroup's limit less its "
      "working set where smaller; run takes a device pool's from its GPU's free memory)");
}

CLI::Validator NotNegative() {
  return CLI::Validator(
      [](const std::string& v) {
        const size_t at = v.find_first_not_of(" \t");
        return at != std::string::npos && v[at] == '-'
                   ? "'" + v + "': a negative number; this flag takes 0 or more"
                   : std::string();
      },
      "", "NotNegative");
}

kvlane::Result<uint64_t> ParseBytes(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  int shift = SuffixShift(text.substr(digits));
  if (digits == 0 || digits > 19 || shift < 0) {
    return kvlane::Status::InvalidArgument("cannot read '" + text + "' as a byte count");
  }
  uint64_t value = std::stoull(text.substr(0, digits));
  if (shift > 0 && value > (UINT64_MAX >> shift)) {
    return kvlane::Status::InvalidArgument("byte count '" + text + "' overflows");
  }
  return value << shift;
}

kvlane::Result<uint64_t> ParseCount(const std::string& text, const std::string& source) {
  const bool digits = !text.empty() && text.size() <= 19 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits && text.rfind('-', 0) == 0) {
    return kvlane::Status::InvalidArgument(source + " '" + text +
                                           "' is a descriptor count: a plain number such as "
                                           "65536, not a negative one");
  }
  if (!digits) {
    return kvlane::Status::InvalidArgument(
        source + " '" + text +
        "' is a descriptor count: a plain number such as 65536, no unit (units are for "
        "--pool-budget's bytes)");
  }
  return std::stoull(text);
}

kvlane::Result<PlanOptions> ResolvePlanOptions(const GridFlags& flags, PlanOptions o) {
  if (!flags.isl.empty()) o.isl = flags.isl;
  if (!flags.batches.empty()) o.batches = flags.batches;
  std::string desc = FlagOrEnv(flags.desc_budget, "KVBENCH_DESC_BUDGET");
  if (!desc.empty()) {
    const char* source = flags.desc_budget.empty() ? "KVBENCH_DESC_BUDGET" : "--desc-budget";
    KVLANE_ASSIGN_OR_RETURN(o.desc_budget, ParseCount(desc, source));
  }
  std::string pool = FlagOrEnv(flags.pool_budget, "KVBENCH_POOL_BUDGET");
  if (!pool.empty()) {
    auto bytes = ParseBytes(pool);
    if (!bytes.ok()) {
      const char* source = flags.pool_budget.empty() ? "KVBENCH_POOL_BUDGET" : "--pool-budget";
      return kvlane::Status::InvalidArgument(std::string(source) + ": " + bytes.status().message());
    }
    o.pool_budget = bytes.value();
  }
  return o;
}

kvlane::Result<Plan> PlanFromFlags(const GridFlags& flags, const PlanOptions& defaults) {
  KVLANE_ASSIGN_OR_RETURN(Workload workload, Workload::Make(flags.workload));
  KVLANE_ASSIGN_OR_RETURN(PlanOptions options, ResolvePlanOptions(flags, defaults));
  return BuildPlan(workload, options);
}

}  // namespace kvbench
