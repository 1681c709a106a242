#include "document.h"

#include <algorithm>
#include <cmath>
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
    json rank = {
        {"rank", r.rank}, {"role", r.role}, {"hostname", r.hostname}, {"devices", r.devices}};
    if (!r.version.empty()) rank["version"] = r.version;
    out.push_back(std::move(rank));
  }
  return out;
}

// Completion offsets to the microsecond: finer than the host can observe them,
// and a third of the characters of a full double.
json MicrosecondArrays(const std::vector<std::vector<double>>& samples) {
  json out = json::array();
  for (const std::vector<double>& sample : samples) {
    json line = json::array();
    for (double ms : sample) line.push_back(std::round(ms * 1000) / 1000);
    out.push_back(std::move(line));
  }
  return out;
}

// Version 1 held the p50 sample's offsets alone, as one flat array.
void ReadRequestMs(const json& j, RowResult* r) {
  const json& a = j.at("request_ms");
  if (!a.empty() && a.front().is_number()) {
    r->request_ms = {a.get<std::vector<double>>()};
    r->p50_sample = 0;
    return;
  }
  r->request_ms = a.get<std::vector<std::vector<double>>>();
  r->p50_sample = j.value("p50_sample", uint64_t{0});
}

bool IsFlat(const json& j) {
  if (!j.is_structured() || j.empty()) return true;
  if (j.is_object()) return false;
  for (const json& e : j) {
    if (e.is_structured()) return false;
  }
  return true;
}

void DumpTo(const json& j, int indent, std::string* out) {
  if (IsFlat(j)) {
    *out += j.dump();
    return;
  }
  const std::string pad(indent + 2, ' ');
  *out += j.is_array() ? "[\n" : "{\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    *out += (first ? "" : ",\n") + pad;
    if (j.is_object()) *out += json(it.key()).dump() + ": ";
    DumpTo(it.value(), indent + 2, out);
    first = false;
  }
  *out += "\n" + std::string(indent, ' ') + (j.is_array() ? "]" : "}");
}

json OutcomeToJson(const CaseDocument& doc) {
  return {{"valid", doc.invalid_reasons.empty()}, {"reasons", doc.invalid_reasons}};
}

bool Measured(const RowKey& key, const std::vector<RowResult>& rows) {
  return std::any_of(rows.begin(), rows.end(), [&](const RowResult& r) {
    return r.op == key.op && r.isl == key.isl && r.batch == key.batch;
  });
}

// Adds the completeness fields to document `j`: "complete" and "rows_missing"
// always, "running" on a checkpoint only, the stop only when it cut the run short.
void AddCompleteness(const Completeness& c, json* j) {
  json missing = json::array();
  for (const RowKey& k : c.missing) {
    missing.push_back({{"op", k.op}, {"isl", k.isl}, {"batch", k.batch}});
  }
  (*j)["complete"] = c.complete;
  (*j)["rows_missing"] = std::move(missing);
  if (c.running) (*j)["running"] = true;
  if (c.stopped_by.empty()) return;
  (*j)["stopped_by"] = c.stopped_by;
  (*j)["stopped_rank"] = c.stopped_rank;
}

}  // namespace

json RowToJson(const RowResult& r) {
  return {{"op", r.op},
          {"isl", r.isl},
          {"batch", r.batch},
          {"descs", r.descs},
          {"segments", r.segments},
          {"req_bytes", r.req_bytes},
          {"burst_ms",
           {{"p50", r.burst_ms.p50},
            {"p95", r.burst_ms.p95},
            {"min", r.burst_ms.min},
            {"max", r.burst_ms.max},
            {"n", r.burst_ms.n}}},
          {"request_ms", MicrosecondArrays(r.request_ms)},
          {"p50_sample", r.p50_sample},
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
    r.segments = j.value("segments", uint64_t{0});  // older documents lack it
    r.req_bytes = j.at("req_bytes").get<uint64_t>();
    const json& b = j.at("burst_ms");
    r.burst_ms = {b.at("p50").get<double>(), b.at("p95").get<double>(), b.at("min").get<double>(),
                  b.at("max").get<double>(), b.at("n").get<size_t>()};
    ReadRequestMs(j, &r);
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
  json j = {{"version", kDocumentVersion},
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
  AddCompleteness(doc.completeness, &j);
  if (!doc.command.empty()) j["command"] = doc.command;
  if (!doc.environment.is_null()) j["environment"] = doc.environment;
  return j;
}

Completeness CompletenessOf(const std::vector<RowKey>& planned, const std::vector<RowResult>& rows,
                            const std::string& stopped_by, const std::string& stopped_rank) {
  Completeness c;
  for (const RowKey& k : planned) {
    if (!Measured(k, rows)) c.missing.push_back(k);
  }
  c.complete = c.missing.empty();
  if (!c.complete) {
    c.stopped_by = stopped_by;
    c.stopped_rank = stopped_rank;
  }
  return c;
}

kvlane::Result<Completeness> CompletenessFromJson(const json& doc) {
  Completeness c;
  if (!doc.contains("complete")) return c;  // version 3 and older: no partial documents
  try {
    c.complete = doc.at("complete").get<bool>();
    for (const json& k : doc.value("rows_missing", json::array())) {
      c.missing.push_back({k.at("op").get<std::string>(), k.at("isl").get<uint64_t>(),
                           k.at("batch").get<uint64_t>()});
    }
    c.stopped_by = doc.value("stopped_by", "");
    c.stopped_rank = doc.value("stopped_rank", "");
    c.running = doc.value("running", false);
  } catch (const json::exception& e) {
    return kvlane::Status::InvalidArgument(std::string("malformed completeness: ") + e.what());
  }
  return c;
}

std::string DescribeRows(const std::vector<RowKey>& rows) {
  std::string out;
  for (const RowKey& k : rows) {
    out += (out.empty() ? "" : ", ") + k.op + " isl " + std::to_string(k.isl) + " batch " +
           std::to_string(k.batch);
  }
  return out;
}

std::string DocumentMemory(const json& impl) {
  if (impl.contains("memory")) return impl.value("memory", "host");
  if (impl.contains("pool")) return impl["pool"].value("memory", "host");
  return impl.value("transport", "") == "cuda" ? "cuda" : "host";
}

std::string RankMemory(const json& impl, const std::string& role) {
  const json* rank = impl.contains("per_rank") ? &impl["per_rank"] : nullptr;
  if (rank != nullptr && rank->contains(role)) return (*rank)[role].value("memory", "host");
  return DocumentMemory(impl);
}

std::string RankStaging(const json& impl, const std::string& role) {
  const json* rank = impl.contains("per_rank") ? &impl["per_rank"] : nullptr;
  if (rank != nullptr && rank->contains(role)) return (*rank)[role].value("staging", "none");
  return impl.value("staging", "none");
}

std::string DescribeMemory(const json& impl) {
  const char* kStaged = "staged through pinned host memory";
  const std::string target = RankMemory(impl, "target"), initiator = RankMemory(impl, "initiator");
  if (target == initiator) {
    const bool staged = impl.value("staging", "none") == "pinned-host";
    return target + (staged ? std::string(", ") + kStaged : "");
  }
  auto one = [&](const std::string& role, const std::string& memory) {
    const bool staged = RankStaging(impl, role) == "pinned-host";
    return role + " " + memory + (staged ? std::string(" (") + kStaged + ")" : "");
  };
  return one("target", target) + ", " + one("initiator", initiator);
}

std::string DumpCompact(const json& j) {
  std::string out;
  DumpTo(j, 0, &out);
  return out;
}

}  // namespace kvbench
