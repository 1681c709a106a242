#include "case_name.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvbench {
namespace {

constexpr size_t kMaxLadderLabel = 48;

std::vector<uint64_t> SortedUnique(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// 8192 -> "8k", 1048576 -> "1m", 1000 -> "1000".
std::string Compact(uint64_t v) {
  if (v != 0 && v % (1u << 20) == 0) return fmt::format("{}m", v >> 20);
  if (v != 0 && v % (1u << 10) == 0) return fmt::format("{}k", v >> 10);
  return std::to_string(v);
}

uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

std::vector<uint64_t> ChangedLadder(std::vector<uint64_t> given, std::vector<uint64_t> preset) {
  given = SortedUnique(std::move(given));
  return given == SortedUnique(std::move(preset)) ? std::vector<uint64_t>() : given;
}

std::string LadderLabel(std::vector<uint64_t> ladder) {
  ladder = SortedUnique(std::move(ladder));
  if (ladder.empty()) return "";
  std::string label;
  for (uint64_t v : ladder) label += (label.empty() ? "" : "_") + Compact(v);
  if (label.size() <= kMaxLadderLabel) return label;
  return fmt::format("{}-{}x{}-{:08x}", Compact(ladder.front()), Compact(ladder.back()),
                     ladder.size(), Fnv1a64(label) & 0xffffffffu);
}

std::string DefaultCaseName(const CaseNameParts& p) {
  auto part = [](const std::string& v, const char* default_value) {
    return v.empty() || v == default_value ? std::string() : "-" + v;
  };
  auto ladder = [](const char* prefix, const std::vector<uint64_t>& v) {
    return v.empty() ? std::string() : prefix + LadderLabel(v);
  };
  return fmt::format("{}-b{}{}-{}{}{}{}{}{}{}{}", p.workload, p.block, part(p.dtype, "bf16"),
                     p.path, part(p.staging_copy, "batch"), part(p.policy, "independent"),
                     p.lanes > 0 ? fmt::format("-lanes{}", p.lanes) : std::string(),
                     part(p.grid, "quick"), ladder("-isl", p.isl), ladder("-b", p.batches),
                     p.ops.size() == 1 ? "-" + p.ops[0] : std::string());
}

}  // namespace kvbench
