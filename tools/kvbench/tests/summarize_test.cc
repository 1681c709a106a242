#include "summarize.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "summary_charts.h"

namespace kvbench {
namespace {

namespace fs = std::filesystem;

// Removes every directory it handed out when the test ends.
class TempDirs {
 public:
  ~TempDirs() {
    for (const fs::path& p : made_) fs::remove_all(p);
  }
  fs::path operator()(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("kvbench_" + name + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    made_.push_back(p);
    return p;
  }

 private:
  std::vector<fs::path> made_;
};

CaseDocument SampleDoc() {
  CaseDocument doc;
  doc.case_name = "kv-dsv4-b256-shm";
  doc.timestamp = UtcTimestamp();
  doc.workload = {{"workload", {{"name", "kv-dsv4"}}}};
  doc.implementation = {{"transport", "shm"}, {"transport_declared", "auto"}, {"lanes", 2}};
  for (const char* op : {"pull", "push"}) {
    for (uint64_t isl : {8192, 32768}) {
      for (uint64_t batch : {1, 2, 4}) {
        RowResult r;
        r.op = op;
        r.isl = isl;
        r.batch = batch;
        r.burst_ms = {1.0 * batch, 1.5 * batch, 0.9, 2.0 * batch, 8};
        r.gbps_p50 = 5.0 + batch;
        r.verdict = Verdict::kPass;
        doc.rows.push_back(r);
      }
    }
  }
  return doc;
}

void Write(const fs::path& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(1); }

TEST(Summarize, LoadsDocumentsAndSkipsOtherJson) {
  TempDirs TempDir;
  fs::path dir = TempDir("load");
  Write(dir / "a.json", DocumentToJson(SampleDoc()));
  Write(dir / "other.json", {{"hello", 1}});
  std::ostringstream log;
  std::vector<std::string> skipped;
  auto docs = LoadDocuments({dir.string()}, log, &skipped);
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  ASSERT_EQ(docs->size(), 1u);
  EXPECT_EQ((*docs)[0].series, "kv-dsv4 shm");
  EXPECT_NE(log.str().find("other.json"), std::string::npos);
  // The page says so too, not only the log.
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("other.json"), std::string::npos);
  const std::string md = RenderMarkdown(docs.value(), {}, skipped);
  EXPECT_NE(md.find("Skipped 1 file(s)"), std::string::npos) << md;
  EXPECT_NE(md.find("other.json"), std::string::npos) << md;
  EXPECT_EQ(RenderMarkdown(docs.value(), {}).find("Skipped"), std::string::npos);
}

// Batches the budgets shed are named in the case's section (not measured, not
// failed); a document whose points are malformed (untrusted input) says nothing
// of them rather than failing.
TEST(Summarize, ShedBatchesAreNamedInTheCaseSection) {
  TempDirs TempDir;
  fs::path dir = TempDir("shed");
  CaseDocument doc = SampleDoc();
  doc.workload["points"] = {
      {{"isl", 8192}, {"shed", nlohmann::json::array()}},
      {{"isl", 32768},
       {"shed", {{{"batch", 8}, {"reason", "pool-budget"}}, {{"batch", 16}, {"reason", 7}}}}},
      {{"isl", 65536},
       {"shed", {{{"batch", nlohmann::json::array()}, {"reason", std::string(99, 'r')}}}}}};
  Write(dir / "a.json", DocumentToJson(doc));
  doc.case_name = "odd";
  doc.workload["points"] = {{{"isl", "x"}, {"shed", "not a list"}}, 5};
  Write(dir / "b.json", DocumentToJson(doc));
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ASSERT_EQ(docs.size(), 2u);
  const std::string md = RenderMarkdown(docs, {});
  EXPECT_NE(md.find("shed by the budgets (batch (budget)): isl 32768: 8 (pool-budget), 16 (7); "
                    "isl 65536: ? (?)\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("isl 8192:"), std::string::npos) << md;
  size_t n = 0;
  for (size_t at = md.find("shed by the budgets"); at != std::string::npos;
       at = md.find("shed by the budgets", at + 1))
    ++n;
  EXPECT_EQ(n, 1u) << md;
}

// Two cases whose lines would read alike (one workload and path, two policies)
// get their case names in the charts' legends; a case alone keeps the short name.
// Each case's header names its policy.
TEST(Summarize, CasesThatWouldReadAlikeAreNamedInTheCharts) {
  TempDirs TempDir;
  fs::path dir = TempDir("alike");
  for (const char* policy : {"independent", "global-fifo"}) {
    CaseDocument doc = SampleDoc();
    doc.case_name = std::string("pol-") + policy;
    doc.implementation["policy"] = policy;
    Write(dir / (doc.case_name + ".json"), DocumentToJson(doc));
  }
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].series, "kv-dsv4 shm [pol-global-fifo]");
  EXPECT_EQ(docs[1].series, "kv-dsv4 shm [pol-independent]");
  ChartSpec f = FrontierChart(docs);
  ASSERT_EQ(f.series.size(), 4u);
  EXPECT_NE(f.series[0].label, f.series[2].label);
  const std::string md = RenderMarkdown(docs, {});
  EXPECT_NE(md.find("lanes 2, policy global-fifo"), std::string::npos) << md;
}

// A results tree (one run per directory) is read whole, and a document named twice
// (its directory under two spellings, or the file and its directory) counts once.
// One case name in two runs' directories: their chart lines carry the paths.
TEST(Summarize, ReadsDirectoriesUnderTheInputsAndEachFileOnce) {
  TempDirs TempDir;
  fs::path dir = TempDir("tree");
  fs::create_directories(dir / "run1");
  fs::create_directories(dir / "run2" / "deeper");
  Write(dir / "run1" / "a.json", DocumentToJson(SampleDoc()));
  Write(dir / "run2" / "deeper" / "a.json", DocumentToJson(SampleDoc()));
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string(), (dir / "run1" / ".." / "run1").string(),
                             (dir / "run1" / "a.json").string()},
                            log)
                  .value();
  ASSERT_EQ(docs.size(), 2u) << log.str();
  EXPECT_NE(docs[0].series, docs[1].series);
  EXPECT_NE(docs[0].series.find("run1"), std::string::npos) << docs[0].series;
  EXPECT_NE(docs[1].series.find("deeper"), std::string::npos) << docs[1].series;
  EXPECT_EQ(docs[0].series.find('['), std::string::npos)
      << docs[0].series;  // the path, not the case
}

// An invalid outcome's reasons are listed one per line as written, not as JSON.
TEST(Summarize, ListsAnInvalidOutcomesReasonsOnePerLine) {
  TempDirs TempDir;
  fs::path dir = TempDir("reasons");
  CaseDocument doc = SampleDoc();
  doc.rows[0].verdict = Verdict::kFail;
  doc.invalid_reasons = {"row pull isl 8192 batch 1: fail (byte 3 differs)", "control: \"x\""};
  Write(dir / "a.json", DocumentToJson(doc));
  std::ostringstream log;
  const std::string md = RenderMarkdown(LoadDocuments({dir.string()}, log).value(), {});
  EXPECT_NE(md.find("- outcome: INVALID\n  - row pull isl 8192 batch 1: fail (byte 3 differs)\n"
                    "  - control: \"x\"\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("[\""), std::string::npos) << md;  // no JSON array in the page
}

// A grid of one ISL and one batch: each chart has a single x value, and the
// script sets a range around it (gnuplot would warn of an empty range otherwise).
TEST(Summarize, AChartOfOneValueGetsARangeAroundIt) {
  TempDirs TempDir;
  fs::path in = TempDir("one_in"), out = TempDir("one_out");
  CaseDocument doc = SampleDoc();
  std::vector<RowResult> one;
  for (const RowResult& r : doc.rows) {
    if (r.isl == 8192 && r.batch == 1) one.push_back(r);
  }
  doc.rows = one;
  Write(in / "a.json", DocumentToJson(doc));
  std::ostringstream log;
  SummaryOutcome s = WriteSummary({in.string()}, out.string(), log);
  ASSERT_EQ(s.exit_code, kSummaryWritten) << s.status.message();
  std::ifstream gp(out / "latency_vs_isl.gp");
  std::string script((std::istreambuf_iterator<char>(gp)), {});
  EXPECT_NE(script.find("set xrange [4096:16384]"), std::string::npos) << script;
  std::ifstream fgp(out / "frontier.gp");
  std::string frontier((std::istreambuf_iterator<char>(fgp)), {});
  EXPECT_NE(frontier.find("set xrange [0.5:2]"), std::string::npos) << frontier;
}

// Truncated, edited or foreign documents are skipped with a note naming the file:
// a missing section or a field of another type must not abort the whole summary.
TEST(Summarize, SkipsTruncatedAndEditedDocuments) {
  TempDirs TempDir;
  fs::path dir = TempDir("edited");
  const nlohmann::json good = DocumentToJson(SampleDoc());
  Write(dir / "a.json", good);
  std::vector<nlohmann::json> bad = {
      {{"version", 1}, {"rows", nlohmann::json::array()}}, good, good, good, good, good};
  bad[1]["implementation"] = "x";
  bad[2]["outcome"]["valid"] = "yes";
  bad[3]["implementation"]["lanes"] = "two";
  bad[4]["identity"]["case"] = 7;
  bad[5]["rows"] = {{"op", "pull"}};
  for (size_t i = 0; i < bad.size(); ++i) {
    Write(dir / ("bad" + std::to_string(i) + ".json"), bad[i]);
  }
  std::string text = good.dump();
  std::ofstream(dir / "truncated.json") << text.substr(0, text.size() / 2);
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log);
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  ASSERT_EQ(docs->size(), 1u) << log.str();
  EXPECT_EQ(fs::path((*docs)[0].path).filename(), "a.json");
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_NE(log.str().find("bad" + std::to_string(i) + ".json"), std::string::npos) << log.str();
  }
  EXPECT_NE(log.str().find("truncated.json is not valid JSON"), std::string::npos) << log.str();
}

// A version it does not know (a newer kvbench's, or none that ever was) is skipped with
// the reason, like any file that is no case document it can read; it used to be read.
TEST(Summarize, SkipsDocumentsOfAVersionItDoesNotKnow) {
  TempDirs TempDir;
  fs::path dir = TempDir("version");
  nlohmann::json good = DocumentToJson(SampleDoc());
  Write(dir / "a.json", good);
  for (int version : {kDocumentVersion + 1, 0, -3}) {
    nlohmann::json doc = good;
    doc["version"] = version;
    Write(dir / ("v" + std::to_string(version) + ".json"), doc);
  }
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log);
  ASSERT_TRUE(docs.ok()) << docs.status().message();
  ASSERT_EQ(docs->size(), 1u) << log.str();
  EXPECT_EQ(fs::path((*docs)[0].path).filename(), "a.json");
  const std::string next = std::to_string(kDocumentVersion + 1);
  EXPECT_NE(log.str().find("v" + next + ".json is a case document of version " + next +
                           ", which this kvbench does not read (it reads versions 1 to " +
                           std::to_string(kDocumentVersion)),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("v0.json"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("v-3.json"), std::string::npos) << log.str();
}

TEST(Summarize, ChartsPickTheLargestIslAndSmallestBatch) {
  TempDirs TempDir;
  fs::path dir = TempDir("charts");
  Write(dir / "a.json", DocumentToJson(SampleDoc()));
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ChartSpec f = FrontierChart(docs);
  ASSERT_EQ(f.series.size(), 2u);  // pull and push
  EXPECT_EQ(f.series[0].label, "pull kv-dsv4 shm isl 32768");
  EXPECT_EQ(f.series[0].points.size(), 3u);
  ChartSpec l = LatencyChart(docs);
  ASSERT_EQ(l.series.size(), 2u);
  EXPECT_EQ(l.series[0].points.size(), 2u);  // two ISLs at batch 1
}

// A row that failed carries no timing (zeros): the charts leave it out and pick
// the largest ISL and smallest batch among the verified rows.
TEST(Summarize, ChartsLeaveOutFailedRows) {
  TempDirs TempDir;
  fs::path dir = TempDir("failed");
  CaseDocument doc = SampleDoc();
  for (RowResult& r : doc.rows) {
    if (r.op == "pull" && (r.isl == 32768 || r.batch == 1)) {
      r.verdict = Verdict::kFail;
      r.burst_ms = {};
      r.gbps_p50 = 0;
    }
    if (r.op == "push") r.verdict = Verdict::kFail;  // nothing of push to draw
  }
  Write(dir / "a.json", DocumentToJson(doc));
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ChartSpec f = FrontierChart(docs);
  ASSERT_EQ(f.series.size(), 1u);
  EXPECT_EQ(f.series[0].label, "pull kv-dsv4 shm isl 8192");
  ASSERT_EQ(f.series[0].points.size(), 2u);  // batches 2 and 4
  EXPECT_EQ(f.series[0].points[0].first, 2.0);
  ChartSpec l = LatencyChart(docs);
  ASSERT_EQ(l.series.size(), 1u);
  EXPECT_EQ(l.series[0].label, "pull kv-dsv4 shm batch 2");
  for (const auto& [x, y] : l.series[0].points) EXPECT_GT(y, 0.0) << x;
}

TEST(Summarize, WritesMarkdownAndSvgs) {
  TempDirs TempDir;
  fs::path in = TempDir("in"), out = TempDir("out");
  Write(in / "a.json", DocumentToJson(SampleDoc()));
  std::ostringstream log;
  SummaryOutcome s = WriteSummary({in.string()}, out.string(), log);
  ASSERT_EQ(s.exit_code, kSummaryWritten) << s.status.message();  // needs gnuplot (gnuplot-nox)
  EXPECT_TRUE(fs::exists(out / "summary.md"));
  EXPECT_TRUE(fs::exists(out / "frontier.svg"));
  EXPECT_TRUE(fs::exists(out / "latency_vs_isl.svg"));
  std::ifstream md(out / "summary.md");
  std::string text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(text.find("| pull | 8192 | 1 |"), std::string::npos);
  EXPECT_NE(text.find("frontier.svg"), std::string::npos);
}

// A render that draws nothing (every row failed) leaves no chart of an earlier
// summary in --out beside the new summary.md.
TEST(Summarize, AFailedRenderLeavesNoEarlierChart) {
  TempDirs TempDir;
  fs::path in = TempDir("stale_in"), out = TempDir("stale_out");
  CaseDocument doc = SampleDoc();
  for (RowResult& r : doc.rows) r.verdict = Verdict::kFail;
  Write(in / "a.json", DocumentToJson(doc));
  std::ofstream(out / "frontier.svg") << "<svg>earlier</svg>";
  std::ofstream(out / "latency_vs_isl.svg") << "<svg>earlier</svg>";
  std::ostringstream log;
  EXPECT_EQ(WriteSummary({in.string()}, out.string(), log).exit_code, kSummaryChartFailed);
  EXPECT_TRUE(fs::exists(out / "summary.md"));
  EXPECT_FALSE(fs::exists(out / "frontier.svg"));
  EXPECT_FALSE(fs::exists(out / "latency_vs_isl.svg"));
}

// A tcp case on device pools is told apart from one on host pools in the chart
// series and the case section; a document without the memory fields reads as host.
TEST(Summarize, NamesTheMemoryAndItsStaging) {
  TempDirs TempDir;
  fs::path dir = TempDir("memory");
  CaseDocument staged = SampleDoc(), plain = SampleDoc();
  staged.case_name = "kv-dsv4-b256-tcp-cuda";
  staged.implementation = {{"transport", "tcp"},       {"transport_declared", "tcp"},
                           {"memory", "cuda"},         {"memory_declared", "cuda"},
                           {"staging", "pinned-host"}, {"lanes", 2}};
  plain.case_name = "kv-dsv4-b256-tcp";
  plain.implementation = {{"transport", "tcp"}, {"transport_declared", "tcp"}, {"lanes", 2}};
  Write(dir / "a.json", DocumentToJson(staged));
  Write(dir / "b.json", DocumentToJson(plain));
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].series, "kv-dsv4 tcp-cuda");
  EXPECT_EQ(docs[1].series, "kv-dsv4 tcp");
  std::string md = RenderMarkdown(docs, {});
  EXPECT_NE(md.find("- transport: tcp (declared tcp), memory cuda, staged through pinned host "
                    "memory, lanes 2"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- transport: tcp (declared tcp), memory host, lanes 2"), std::string::npos)
      << md;
}

// Version 3: a host pool on one rank and a device pool on the other. The series
// and the case section name both ranks, target first; a version 2 document beside
// it (one memory for both ranks) still reads as before.
TEST(Summarize, NamesEachRanksMemoryWhenTheyDiffer) {
  TempDirs TempDir;
  fs::path dir = TempDir("mixed");
  CaseDocument mixed = SampleDoc(), old = SampleDoc();
  mixed.case_name = "kv-dsv4-b256-tcp-cuda-host";
  mixed.implementation = {
      {"transport", "tcp"},
      {"transport_declared", "auto"},
      {"memory", "cuda,host"},
      {"memory_declared", "cuda,host"},
      {"staging", "pinned-host"},
      {"per_rank",
       {{"target", {{"memory", "cuda"}, {"staging", "pinned-host"}, {"device", 0}}},
        {"initiator", {{"memory", "host"}, {"staging", "none"}}}}},
      {"lanes", 2}};
  old.case_name = "kv-dsv4-b256-tcp-cuda";
  old.implementation = {{"transport", "tcp"},       {"transport_declared", "tcp"},
                        {"memory", "cuda"},         {"memory_declared", "cuda"},
                        {"staging", "pinned-host"}, {"lanes", 2}};
  nlohmann::json old_json = DocumentToJson(old);
  old_json["version"] = 2;
  Write(dir / "a.json", DocumentToJson(mixed));
  Write(dir / "b.json", old_json);
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].json["version"], kDocumentVersion);
  EXPECT_EQ(docs[0].series, "kv-dsv4 tcp-cuda-host");
  EXPECT_EQ(docs[1].series, "kv-dsv4 tcp-cuda");
  std::string md = RenderMarkdown(docs, {});
  EXPECT_NE(md.find("- transport: tcp (declared auto), memory target cuda (staged through pinned "
                    "host memory), initiator host, lanes 2"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- transport: tcp (declared tcp), memory cuda, staged through pinned host "
                    "memory, lanes 2"),
            std::string::npos)
      << md;
}

// A stopped run's document holds part of the grid: the page header and the case's
// heading say PARTIAL, the section lists the rows it lacks as not measured (not as
// failures), its outcome is over the rows it holds, and its chart lines are marked.
// A version 3 document beside it, without the field, is a complete one.
TEST(Summarize, SaysAPartialDocumentIsPartialAndWhichRowsItLacks) {
  TempDirs TempDir;
  fs::path dir = TempDir("partial");
  CaseDocument stopped = SampleDoc(), old = SampleDoc();
  std::vector<RowKey> planned;
  for (const RowResult& r : stopped.rows) planned.push_back({r.op, r.isl, r.batch});
  stopped.rows.resize(4);  // pull isl 8192 batches 1, 2, 4 and pull isl 32768 batch 1
  stopped.completeness = CompletenessOf(planned, stopped.rows, "SIGINT", "initiator");
  old.case_name = "kv-dsv4-b256-shm-old";
  nlohmann::json old_json = DocumentToJson(old);
  old_json["version"] = 3;
  old_json.erase("complete");
  old_json.erase("rows_missing");
  Write(dir / "a.json", DocumentToJson(stopped));
  Write(dir / "b.json", old_json);
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ASSERT_EQ(docs.size(), 2u) << log.str();
  EXPECT_FALSE(docs[0].completeness.complete);
  EXPECT_TRUE(docs[1].completeness.complete);
  EXPECT_EQ(docs[0].series, "kv-dsv4 shm (partial)");
  EXPECT_EQ(docs[1].series, "kv-dsv4 shm");
  std::string md = RenderMarkdown(docs, {});
  const std::string header = md.substr(0, md.find("\n## "));
  EXPECT_NE(header.find("**PARTIAL** (1 of 2 document(s) hold part of their grid"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find((dir / "a.json").string()), std::string::npos) << header;
  EXPECT_EQ(header.find("b.json"), std::string::npos) << header;
  EXPECT_NE(md.find("## kv-dsv4-b256-shm (PARTIAL)\n"), std::string::npos) << md;
  EXPECT_NE(md.find("## kv-dsv4-b256-shm-old\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- **PARTIAL**: stopped by SIGINT on the initiator after 4 of 12 rows; not "
                    "measured (neither failed nor verified): pull isl 32768 batch 2, pull isl "
                    "32768 batch 4, push isl 8192 batch 1,"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- outcome: valid (over the rows measured)\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("INVALID"), std::string::npos) << md;
  const size_t section = md.find("## kv-dsv4-b256-shm (PARTIAL)");
  ASSERT_NE(section, std::string::npos) << md;
  const std::string partial = md.substr(section, md.find("## kv-dsv4-b256-shm-old") - section);
  EXPECT_EQ(partial.find("| push |"), std::string::npos)
      << partial;  // none made up for the missing
  ChartSpec f = FrontierChart(docs);
  ASSERT_EQ(f.series.size(), 3u);  // pull of the partial document; pull and push of the other
  EXPECT_EQ(f.series[0].label, "pull kv-dsv4 shm (partial) isl 32768");
}

// The checkpoint a run killed outright left (no later write came): PARTIAL, saying the
// run had not ended when it was written, and naming the rows it lacks.
TEST(Summarize, SaysACheckpointIsPartialAndWhy) {
  TempDirs TempDir;
  fs::path dir = TempDir("checkpoint");
  CaseDocument running = SampleDoc();
  std::vector<RowKey> planned;
  for (const RowResult& r : running.rows) planned.push_back({r.op, r.isl, r.batch});
  running.rows.resize(11);
  running.completeness = CompletenessOf(planned, running.rows, "", "");
  running.completeness.running = true;
  Write(dir / "a.json", DocumentToJson(running));
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ASSERT_EQ(docs.size(), 1u) << log.str();
  EXPECT_TRUE(docs[0].completeness.running);
  EXPECT_EQ(docs[0].series, "kv-dsv4 shm (partial)");
  std::string md = RenderMarkdown(docs, {});
  EXPECT_NE(md.find("**PARTIAL** (1 of 1 document(s) hold part of their grid: the run ended "
                    "before its last row, or had not ended when written)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- **PARTIAL**: a checkpoint of a run that had not ended (killed outright, "
                    "crashed, or still running), written after 11 of 12 rows; not measured "
                    "(neither failed nor verified): push isl 32768 batch 4\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- outcome: valid (over the rows measured)\n"), std::string::npos) << md;
}

// The checkpoint after the last row (written before the run's closing exchange, so that
// a kill then keeps that row): every row in, still partial, nothing listed as missing.
TEST(Summarize, ACheckpointAfterTheLastRowIsPartialWithNothingMissing) {
  TempDirs TempDir;
  fs::path dir = TempDir("last_checkpoint");
  CaseDocument running = SampleDoc();
  running.completeness = {};
  running.completeness.complete = false;
  running.completeness.running = true;
  Write(dir / "a.json", DocumentToJson(running));
  std::ostringstream log;
  auto docs = LoadDocuments({dir.string()}, log).value();
  ASSERT_EQ(docs.size(), 1u) << log.str();
  EXPECT_FALSE(docs[0].completeness.complete);
  std::string md = RenderMarkdown(docs, {});
  EXPECT_NE(md.find("- **PARTIAL**: a checkpoint of a run that had not ended (killed outright, "
                    "crashed, or still running), written after 12 of 12 rows; not measured "
                    "(neither failed nor verified): none (its last row had finished)\n"),
            std::string::npos)
      << md;
}

TEST(Summarize, NoDocumentsIsAnError) {
  TempDirs TempDir;
  std::ostringstream log;
  EXPECT_FALSE(LoadDocuments({TempDir("empty").string()}, log).ok());
}

// A script tells "nothing to summarize" (4) from "a chart failed" (3) and from a
// path that does not exist (2); only a failed chart leaves a summary.md.
TEST(Summarize, ExitCodesTellWhatWentWrong) {
  TempDirs TempDir;
  fs::path empty = TempDir("codes_empty"), out = TempDir("codes_out");
  std::ostringstream log;
  SummaryOutcome none = WriteSummary({empty.string()}, out.string(), log);
  EXPECT_EQ(none.exit_code, kSummaryNoDocuments);
  EXPECT_EQ(none.status.code(), kvlane::Code::kNotFound);
  SummaryOutcome missing = WriteSummary({(empty / "nope").string()}, out.string(), log);
  EXPECT_EQ(missing.exit_code, kSummaryError);
  EXPECT_NE(missing.status.message().find("nope: no such file or directory"), std::string::npos)
      << missing.status.message();
  EXPECT_FALSE(fs::exists(out / "summary.md"));
  SummaryOutcome ok_and_missing =
      WriteSummary({empty.string(), "/nonexistent-kvbench"}, out.string(), log);
  EXPECT_EQ(ok_and_missing.exit_code, kSummaryError);  // not skipped: a mistyped path
}

}  // namespace
}  // namespace kvbench
