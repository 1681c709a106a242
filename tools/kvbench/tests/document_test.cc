#include "document.h"

#include <gtest/gtest.h>

#include "common/environment.h"

namespace kvbench {
namespace {

RowResult SampleRow() {
  RowResult r;
  r.op = "pull";
  r.isl = 8192;
  r.batch = 4;
  r.descs = 98;
  r.segments = 390;
  r.req_bytes = 50518656;
  r.burst_ms = {10.5, 12.0, 9.0, 13.0, 16};
  r.request_ms = {{2.5, 5.0, 7.5, 11.0}, {2.5, 5.0, 7.5, 10.0}, {1.25, 2.0, 3.0, 4.0006}};
  r.p50_sample = 1;
  r.prep_ms = 0.75;
  r.gbps_p50 = 19.2;
  r.gbps_p50_incl_prep = 17.9;
  r.verdict = Verdict::kPass;
  r.verify_detail = "checked 202074624 B, 0 mismatches";
  r.reference = {"memcpy", 20.0, 10.1};
  return r;
}

TEST(Document, RowRoundTrips) {
  RowResult r = SampleRow();
  auto back = RowFromJson(RowToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->op, "pull");
  EXPECT_EQ(back->batch, 4u);
  EXPECT_EQ(back->segments, 390u);
  EXPECT_EQ(back->request_ms[0], r.request_ms[0]);
  EXPECT_EQ(back->request_ms[2][3], 4.001);  // offsets are kept to the microsecond
  EXPECT_EQ(back->p50_sample, 1u);
  EXPECT_EQ(back->burst_ms.p95, 12.0);
  EXPECT_EQ(back->verdict, Verdict::kPass);
  EXPECT_EQ(back->reference.method, "memcpy");
}

TEST(Document, VersionOneRequestMsReadsAsOneSample) {
  nlohmann::json j = RowToJson(SampleRow());
  j["request_ms"] = {2.5, 5.0};
  j.erase("p50_sample");
  j.erase("segments");
  auto back = RowFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->segments, 0u);  // not recorded
  ASSERT_EQ(back->request_ms.size(), 1u);
  EXPECT_EQ(back->request_ms[0], (std::vector<double>{2.5, 5.0}));
  EXPECT_EQ(back->p50_sample, 0u);
}

TEST(Document, CompactDumpKeepsEachSampleOnOneLine) {
  nlohmann::json j = {{"rows", {RowToJson(SampleRow())}}, {"empty", nlohmann::json::object()}};
  std::string text = DumpCompact(j);
  EXPECT_NE(text.find("\n        [2.5,5.0,7.5,10.0],\n"), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(text), j);
}

TEST(Document, MalformedRowIsAnError) {
  nlohmann::json j = RowToJson(SampleRow());
  j.erase("burst_ms");
  EXPECT_FALSE(RowFromJson(j).ok());
  EXPECT_FALSE(RowFromJson(nlohmann::json::array()).ok());
}

TEST(Document, HasTheRequiredSections) {
  CaseDocument doc;
  doc.case_name = "kv-dsv4-b256-shm";
  doc.timestamp = UtcTimestamp();
  doc.rows = {SampleRow()};
  doc.ranks = {{0, "target", "h0", {"host"}}, {1, "initiator", "h0", {"host"}}};
  nlohmann::json j = DocumentToJson(doc);
  EXPECT_TRUE(j["version"].is_number_integer());
  EXPECT_EQ(j["version"], kDocumentVersion);
  for (const char* key :
       {"identity", "workload", "sampling", "rows", "implementation", "topology", "outcome"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["outcome"]["valid"], true);
  doc.invalid_reasons = {"row pull 8192x4 failed verification"};
  EXPECT_EQ(DocumentToJson(doc)["outcome"]["valid"], false);
  EXPECT_EQ(UtcTimestamp().size(), 20u);
}

// Provenance as lanebench records it (common/environment.h): the command line and the
// host; a document without them (a hand-made one) has neither key.
TEST(Document, RecordsTheCommandAndTheEnvironment) {
  CaseDocument doc;
  EXPECT_FALSE(DocumentToJson(doc).contains("command"));
  EXPECT_FALSE(DocumentToJson(doc).contains("environment"));
  doc.command = kvlane_tools::CommandLine();
  doc.environment = kvlane_tools::HostEnvironment();
  nlohmann::json j = DocumentToJson(doc);
  EXPECT_EQ(j["version"], kDocumentVersion);
  EXPECT_EQ(j["command"].get<std::string>().rfind("kvbench_core_test", 0), 0u) << j["command"];
  for (const char* key : {"host", "cpus", "cpu_model", "kernel", "date_utc", "loadavg_start"}) {
    EXPECT_TRUE(j["environment"].contains(key)) << key;
  }
  EXPECT_NE(j["environment"]["loadavg_start"], "unknown");
}

// The recorded command reads back as the words that ran: `--case "a b"` used to be
// recorded as `--case a b`, and a word with glob or quote characters as it was.
TEST(Document, TheCommandIsShellQuotedWordByWord) {
  using kvlane_tools::JoinShellWords;
  EXPECT_EQ(JoinShellWords({"kvbench", "run", "--out=/tmp/x", "--isl", "8192,16384"}),
            "kvbench run --out=/tmp/x --isl 8192,16384");
  EXPECT_EQ(JoinShellWords({"kvbench", "run", "--case", "a b"}), "kvbench run --case 'a b'");
  EXPECT_EQ(JoinShellWords({"--case", "it's", "*.json", ""}), R"(--case 'it'\''s' '*.json' '')");
  EXPECT_EQ(JoinShellWords({"$HOME", "a;b"}), "'$HOME' 'a;b'");
}

// A stopped run keeps the rows that finished: the document says it is not complete,
// which rows it lacks (in plan order) and which signal stopped which rank.
TEST(Document, APartialRunNamesItsMissingRowsAndTheStop) {
  const std::vector<RowKey> planned = {
      {"pull", 8192, 4}, {"push", 8192, 4}, {"pull", 8192, 8}, {"push", 8192, 8}};
  CaseDocument doc;
  doc.rows = {SampleRow()};  // pull isl 8192 batch 4
  doc.completeness = CompletenessOf(planned, doc.rows, "SIGINT", "initiator");
  EXPECT_FALSE(doc.completeness.complete);
  const std::vector<RowKey> missing(planned.begin() + 1, planned.end());
  EXPECT_EQ(doc.completeness.missing, missing);
  nlohmann::json j = DocumentToJson(doc);
  EXPECT_EQ(j["version"], 4);
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["stopped_by"], "SIGINT");
  EXPECT_EQ(j["stopped_rank"], "initiator");
  ASSERT_EQ(j["rows_missing"].size(), 3u);
  EXPECT_EQ(j["rows_missing"][0], (nlohmann::json{{"op", "push"}, {"isl", 8192}, {"batch", 4}}));
  EXPECT_EQ(j["outcome"]["valid"], true);  // the rows it holds all passed
  auto back = CompletenessFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->complete);
  EXPECT_EQ(back->missing, missing);
  EXPECT_EQ(back->stopped_by, "SIGINT");
  EXPECT_EQ(back->stopped_rank, "initiator");
  EXPECT_EQ(DescribeRows({missing[0], missing[1]}), "push isl 8192 batch 4, pull isl 8192 batch 8");
}

// The initiator's checkpoint (written after a row, more rows to come) is partial and
// says "running"; a final document does not carry the key, and reads as not running.
TEST(Document, ACheckpointSaysItWasWrittenWhileTheRunWentOn) {
  const std::vector<RowKey> planned = {{"pull", 8192, 4}, {"push", 8192, 4}};
  CaseDocument doc;
  doc.rows = {SampleRow()};
  doc.completeness = CompletenessOf(planned, doc.rows, "", "");
  nlohmann::json final_doc = DocumentToJson(doc);
  EXPECT_FALSE(final_doc.contains("running"));
  EXPECT_FALSE(CompletenessFromJson(final_doc)->running);
  doc.completeness.running = true;
  nlohmann::json j = DocumentToJson(doc);
  EXPECT_EQ(j["version"], 4);
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["running"], true);
  EXPECT_FALSE(j.contains("stopped_by"));
  auto back = CompletenessFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->running);
  EXPECT_FALSE(back->complete);
  EXPECT_EQ(back->missing, std::vector<RowKey>(planned.begin() + 1, planned.end()));
  j["running"] = "yes";
  EXPECT_FALSE(CompletenessFromJson(j).ok());
}

// A stop after the last row cut nothing: the document is complete and names no stop.
// A complete document says so too; one without the field (version 3) reads as complete.
TEST(Document, AWholeRunIsCompleteAndOlderDocumentsReadAsComplete) {
  const std::vector<RowKey> planned = {{"pull", 8192, 4}};
  Completeness c = CompletenessOf(planned, {SampleRow()}, "SIGTERM", "initiator");
  EXPECT_TRUE(c.complete);
  EXPECT_TRUE(c.missing.empty());
  EXPECT_EQ(c.stopped_by, "");
  CaseDocument doc;
  doc.rows = {SampleRow()};
  doc.completeness = c;
  nlohmann::json j = DocumentToJson(doc);
  EXPECT_EQ(j["complete"], true);
  EXPECT_EQ(j["rows_missing"], nlohmann::json::array());
  EXPECT_FALSE(j.contains("stopped_by"));
  j.erase("complete");
  j.erase("rows_missing");
  j["version"] = 3;
  auto old = CompletenessFromJson(j);
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->complete);
  j["complete"] = "no";
  EXPECT_FALSE(CompletenessFromJson(j).ok());
  j["complete"] = false;
  j["rows_missing"] = {{{"op", "pull"}}};
  EXPECT_FALSE(CompletenessFromJson(j).ok());
}

// Version 3 documents give each rank's memory and staging; older ones one memory
// for both ranks, which each rank then reads.
TEST(Document, EachRanksMemoryFromPerRankElseTheSharedFields) {
  nlohmann::json v3 = {{"memory", "host,cuda"},
                       {"staging", "pinned-host"},
                       {"per_rank",
                        {{"target", {{"memory", "host"}, {"staging", "none"}}},
                         {"initiator", {{"memory", "cuda"}, {"staging", "pinned-host"}}}}}};
  EXPECT_EQ(DocumentMemory(v3), "host,cuda");
  EXPECT_EQ(RankMemory(v3, "target"), "host");
  EXPECT_EQ(RankMemory(v3, "initiator"), "cuda");
  EXPECT_EQ(RankStaging(v3, "target"), "none");
  EXPECT_EQ(RankStaging(v3, "initiator"), "pinned-host");
  EXPECT_EQ(DescribeMemory(v3), "target host, initiator cuda (staged through pinned host memory)");
  nlohmann::json v2 = {{"memory", "cuda"}, {"staging", "pinned-host"}};
  EXPECT_EQ(RankMemory(v2, "target"), "cuda");
  EXPECT_EQ(RankMemory(v2, "initiator"), "cuda");
  EXPECT_EQ(RankStaging(v2, "initiator"), "pinned-host");
  EXPECT_EQ(DescribeMemory(v2), "cuda, staged through pinned host memory");
  nlohmann::json v1 = {{"transport", "shm"}};
  EXPECT_EQ(RankMemory(v1, "target"), "host");
  EXPECT_EQ(RankStaging(v1, "target"), "none");
  EXPECT_EQ(DescribeMemory(v1), "host");
}

}  // namespace
}  // namespace kvbench
