#include "plan_report.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace kvbench {
namespace {

using nlohmann::json;

json PointToJson(const PlanPoint& p) {
  json shed = json::array();
  for (const ShedBatch& s : p.shed) shed.push_back({{"batch", s.batch}, {"reason", s.reason}});
  return {{"isl", p.isl},         {"descs", p.descs}, {"req_bytes", p.req_bytes},
          {"batches", p.batches}, {"shed", shed},     {"pool_bytes", p.pool_bytes}};
}

std::string Bytes(uint64_t b) {
  if (b >= kGiB) return fmt::format("{:.2f} GiB", static_cast<double>(b) / kGiB);
  return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1 << 20));
}

std::string Join(const std::vector<uint64_t>& v) {
  return v.empty() ? std::string("-") : fmt::format("{}", fmt::join(v, ","));
}

std::string ShedText(const std::vector<ShedBatch>& shed) {
  std::string s;
  for (const ShedBatch& b : shed)
    s += fmt::format("{}{}({})", s.empty() ? "" : " ", b.batch, b.reason);
  return s.empty() ? "-" : s;
}

}  // namespace

json GroupsToJson(const Workload& workload) {
  json groups = json::array();
  for (const Group& g : workload.groups()) {
    groups.push_back({{"name", g.name},
                      {"layers", g.layers},
                      {"block_tokens", g.block_tokens},
                      {"tokens_per_state", g.tokens_per_state},
                      {"state_bytes", g.state_bytes},
                      {"page_bytes", g.page_bytes},
                      {"packed_bytes", g.packed_bytes},
                      {"descs_per_block", g.descs_per_block},
                      {"window_tokens", g.window_tokens}});
  }
  return groups;
}

json LayoutToJson(const PoolLayout& layout) {
  json groups = json::array();
  for (const GroupLayout& g : layout.groups) {
    groups.push_back({{"name", g.name},
                      {"offset", g.offset},
                      {"bytes", g.bytes},
                      {"piece_bytes", g.piece_bytes},
                      {"desc_bytes", g.desc_bytes}});
  }
  json pieces = json::array();
  for (const Piece& p : layout.pieces) pieces.push_back({{"offset", p.offset}, {"bytes", p.bytes}});
  return {{"bytes", layout.bytes}, {"groups", groups}, {"pieces", pieces}};
}

json PointsToJson(const Plan& plan) {
  json points = json::array();
  for (const PlanPoint& p : plan.points) points.push_back(PointToJson(p));
  return points;
}

json PlanToJson(const Plan& plan) {
  const json points = PointsToJson(plan);
  const PlanOptions& o = plan.options;
  json workload = {{"name", plan.workload.name()}, {"block", plan.workload.block()}};
  if (!plan.workload.dtype().empty()) workload["dtype"] = plan.workload.dtype();  // kv-mla only
  return {{"workload", workload},
          {"options",
           {{"isl", o.isl},
            {"batches", o.batches},
            {"desc_budget", o.desc_budget},
            {"pool_budget", o.pool_budget},
            {"piece_bytes", o.piece_bytes},
            {"ladder_floor", kLadderFloor}}},
          {"groups", GroupsToJson(plan.workload)},
          {"points", points},
          {"layout", LayoutToJson(plan.layout)}};
}

std::string ShedSummary(const json& points) {
  const auto field = [](const json& o, const char* key) -> std::string {
    if (!o.is_object()) return "?";
    const auto it = o.find(key);
    if (it == o.end()) return "?";
    if (it->is_number_unsigned()) return std::to_string(it->get<uint64_t>());
    if (it->is_string() && it->get_ref<const std::string&>().size() <= 32)
      return it->get<std::string>();
    return "?";
  };
  std::string s;
  if (!points.is_array()) return s;
  for (const json& p : points) {
    if (!p.is_object() || !p.contains("shed") || !p["shed"].is_array()) continue;
    std::string batches;
    for (const json& b : p["shed"])
      batches += fmt::format("{}{} ({})", batches.empty() ? "" : ", ", field(b, "batch"),
                             field(b, "reason"));
    if (!batches.empty())
      s += fmt::format("{}isl {}: {}", s.empty() ? "" : "; ", field(p, "isl"), batches);
  }
  return s.empty() ? s : "not measured, shed by the budgets (batch (budget)): " + s;
}

void PrintPlan(const Plan& plan, std::ostream& out) {
  const PlanOptions& o = plan.options;
  const std::string& dtype = plan.workload.dtype();
  fmt::print(out, "workload {} block {}{}  desc budget {}  pool budget {}\n\n",
             plan.workload.name(), plan.workload.block(), dtype.empty() ? "" : " dtype " + dtype,
             o.desc_budget, Bytes(o.pool_budget));
  fmt::print(out, "{:<8} {:>6} {:>6} {:>12} {:>14}\n", "group", "layers", "block", "page_B",
             "descriptor_B");
  for (const Group& g : plan.workload.groups()) {
    fmt::print(out, "{:<8} {:>6} {:>6} {:>12} {:>14}\n", g.name, g.layers, g.block_tokens,
               g.page_bytes, g.packed_bytes);
  }
  fmt::print(out, "\n{:>8} {:>8} {:>14} {:<16} {:>12}  {}\n", "isl", "descs", "req_bytes",
             "batches", "pool", "shed");
  for (const PlanPoint& p : plan.points) {
    fmt::print(out, "{:>8} {:>8} {:>14} {:<16} {:>12}  {}\n", p.isl, p.descs, p.req_bytes,
               Join(p.batches), Bytes(p.pool_bytes), ShedText(p.shed));
  }
  fmt::print(out, "\nshared pool: {} ({} B) in {} piece(s), {} row(s) per op\n",
             Bytes(plan.layout.bytes), plan.layout.bytes, plan.layout.pieces.size(), plan.Rows());
}

}  // namespace kvbench
