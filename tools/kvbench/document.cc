#include "document.h"

#include <ctime>

namespace kvbench {
namespace {

using nlohmann::json;

Verdict ParseVerdict(const std::string& name) {
  if (name == "pass") return Verdict::kPass;
  if (name == "no-verifier") return Verdict::kNoVerifier;
  return Verdict::kFail;
}

json RanksToJson(const std::vector<RankInfo>& ranks) {
  json out = json::array();
  for (const RankInfo& r : ranks) {
    out.push_back(
        {{"rank", r.rank}, {"role", r.role}, {"hostname", r.hostname}, {"devices", r.devices}});
  }
  return out;
}

json OutcomeToJson(const CaseDocument& doc) {
  return {{"valid", doc.invalid_reasons.empty()}, {"reasons", doc.invalid_reasons}};
}

}  // namespace

json RowToJson(const RowResult& r) {
  return {{"op", r.op},
          {"isl", r.isl},
          {"batch", r.batch},
          {"descs", r.descs},
          {"req_bytes", r.req_bytes},
          {"burst_ms",
           {{"p50", r.burst_ms.p50},
            {"p95", r.burst_ms.p95},
            {"min", r.burst_ms.min},
            {"max", r.burst_ms.max},
            {"n", r.burst_ms.n}}},
          {"request_ms", r.request_ms},
          {"prep_ms", r.prep_ms},
          {"gbps_p50", r.gbps_p50},
          {"gbps_p50_incl_prep", r.gbps_p50_incl_prep},
          {"verified", VerdictName(r.verdict)},
          {"verify_detail", r.verify_detail},
          {"reference",
           {{"method", r.reference.method},
            {"p50_ms", r.reference.p50_ms},
            {"gbps_p50", r.reference.gbps_p50}}}};
}

kvlane::Result<RowResult> RowFromJson(const json& j) {
  try {
    RowResult r;
    r.op = j.at("op").get<std::string>();
    r.isl = j.at("isl").get<uint64_t>();
    r.batch = j.at("batch").get<uint64_t>();
    r.descs = j.at("descs").get<uint64_t>();
    r.req_bytes = j.at("req_bytes").get<uint64_t>();
    const json& b = j.at("burst_ms");
    r.burst_ms = {b.at("p50").get<double>(), b.at("p95").get<double>(), b.at("min").get<double>(),
                  b.at("max").get<double>(), b.at("n").get<size_t>()};
    r.request_ms = j.at("request_ms").get<std::vector<double>>();
    r.prep_ms = j.at("prep_ms").get<double>();
    r.gbps_p50 = j.at("gbps_p50").get<double>();
    r.gbps_p50_incl_prep = j.at("gbps_p50_incl_prep").get<double>();
    r.verdict = ParseVerdict(j.at("verified").get<std::string>());
    r.verify_detail = j.value("verify_detail", "");
    const json& ref = j.at("reference");
    r.reference = {ref.at("method").get<std::string>(), ref.at("p50_ms").get<double>(),
                   ref.at("gbps_p50").get<double>()};
    return r;
  } catch (const json::exception& e) {
    return kvlane::Status::InvalidArgument(std::string("malformed row: ") + e.what());
  }
}

json DocumentToJson(const CaseDocument& doc) {
  json rows = json::array();
  for (const RowResult& r : doc.rows) rows.push_back(RowToJson(r));
  return {{"version", kDocumentVersion},
          {"identity", {{"case", doc.case_name}, {"timestamp", doc.timestamp}}},
          {"workload", doc.workload},
          {"sampling",
           {{"warmup", doc.warmup},
            {"samples", doc.samples},
            {"trials", doc.trials},
            {"bursts_per_row", doc.samples * doc.trials}}},
          {"rows", rows},
          {"implementation", doc.implementation},
          {"topology", {{"ranks", RanksToJson(doc.ranks)}, {"link", doc.link}}},
          {"outcome", OutcomeToJson(doc)}};
}

std::string UtcTimestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace kvbench
