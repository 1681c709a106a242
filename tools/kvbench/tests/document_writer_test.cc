// DocumentWriter on a real initiator session (two ranks opened in one process over
// tcp): the checkpoints' pace, the checkpoint after the last row, a run that ends with
// an error after a checkpoint, and the host memory bounds the document records.
#include "document_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "run_report.h"
#include "session_pair.h"

namespace kvbench {
namespace {

namespace fs = std::filesystem;
using Clock = CheckpointPace::Clock;
using std::chrono::milliseconds;

TEST(CheckpointPace, TheFirstAndLastRowsAndThenEveryInterval) {
  CheckpointPace pace(milliseconds(2000));
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(pace.Due(1, 10, t0));  // the first row
  pace.Ended(t0);
  EXPECT_FALSE(pace.Due(2, 10, t0 + milliseconds(1999)));
  EXPECT_TRUE(pace.Due(10, 10, t0 + milliseconds(1)));  // the last row, always
  EXPECT_TRUE(pace.Due(3, 10, t0 + milliseconds(2000)));
  pace.Ended(t0 + milliseconds(2500));  // counted from a write's end
  EXPECT_FALSE(pace.Due(4, 10, t0 + milliseconds(4000)));
  EXPECT_TRUE(pace.Due(4, 10, t0 + milliseconds(4500)));
}

// A fresh --out and the pair of sessions writing into it: `ops` at isl 8192 and
// `batches` (one row per op and batch); the initiator's document is `<out>/<doc>.json`.
fs::path FreshOut(const std::string& name) {
  fs::path out = fs::temp_directory_path() / ("kvbench_writer_" + name + std::to_string(getpid()));
  fs::remove_all(out);
  return out;
}

std::vector<std::string> Flags(const std::string& ops, const std::string& batches) {
  return {"--transport", "tcp", "--ops", ops, "--batches", batches};
}

struct PairRun {
  fs::path out;
  std::string doc;
  testing::SessionPair pair;
  PairRun(const std::string& name, const std::string& ops, const std::string& batches,
          const std::string& doc)
      : out(FreshOut(name)), doc(doc), pair(testing::OpenBoth(Flags(ops, batches), [&] {
          std::vector<std::string> f = Flags(ops, batches);
          f.insert(f.end(), {"--out", out.string()});
          return f;
        }())) {}
  ~PairRun() { fs::remove_all(out); }
  const Session* initiator() const { return pair.initiator.value().get(); }
  // The rows of the plan's first `n` planned rows, each passed.
  RunResult Rows(size_t n) const {
    RunResult r;
    for (const RowKey& k : PlannedRows(initiator()->plan(), initiator()->config().ops)) {
      if (r.rows.size() == n) break;
      RowResult row;
      row.op = k.op;
      row.isl = k.isl;
      row.batch = k.batch;
      row.verdict = Verdict::kPass;
      r.rows.push_back(row);
    }
    return r;
  }
  std::optional<nlohmann::json> Document() const {
    std::ifstream in(out / (doc + ".json"));
    if (!in) return std::nullopt;
    return nlohmann::json::parse(in);
  }
};

// The finding: the last row had no checkpoint, and the final write waited for the
// closing exchange with the target (up to the control timeout); a kill meanwhile lost
// a finished row. The last row is checkpointed too, still partial and running.
TEST(DocumentWriter, TheLastRowIsCheckpointedAsRunning) {
  PairRun run("last", "pull", "1", "kv-dsv4-b256-tcp-isl8k-b1-pull");
  ASSERT_TRUE(run.pair.initiator.ok()) << run.pair.initiator.status().message();
  ASSERT_TRUE(run.pair.target.ok()) << run.pair.target.status().message();
  DocumentWriter writer(run.initiator(), nlohmann::json::object());
  writer.Checkpoint(run.Rows(1));  // 1 of 1 planned
  const std::optional<nlohmann::json> doc = run.Document();
  ASSERT_TRUE(doc.has_value()) << "no checkpoint after the last row";
  EXPECT_EQ((*doc)["rows"].size(), 1u);
  EXPECT_EQ((*doc)["complete"], false);
  EXPECT_EQ((*doc)["running"], true);
  EXPECT_EQ((*doc)["rows_missing"], nlohmann::json::array());
  // The final document ends it.
  ASSERT_TRUE(writer.Write(writer.Final(run.Rows(1))).ok());
  EXPECT_EQ((*run.Document())["complete"], true);
  EXPECT_FALSE(run.Document()->contains("running"));
}

// Between the first and last rows a checkpoint comes at most once per kCheckpointEvery.
TEST(DocumentWriter, CheckpointsArePaced) {
  PairRun run("pace", "pull,push", "1,2", "kv-dsv4-b256-tcp-isl8k-b1_2");  // 4 rows
  ASSERT_TRUE(run.pair.initiator.ok()) << run.pair.initiator.status().message();
  DocumentWriter writer(run.initiator(), nlohmann::json::object(), std::chrono::hours(1));
  writer.Checkpoint(run.Rows(1));
  EXPECT_EQ((*run.Document())["rows"].size(), 1u);
  writer.Checkpoint(run.Rows(2));  // within the hour of the first: skipped
  EXPECT_EQ((*run.Document())["rows"].size(), 1u);
  writer.Checkpoint(run.Rows(4));  // the last
  EXPECT_EQ((*run.Document())["rows"].size(), 4u);
  EXPECT_EQ((*run.Document())["running"], true);
}

// The finding: a run that ended with an error after a checkpoint (here the writer goes
// without a final write, as when an exception escapes the rows) left a document saying
// the run had not ended. It now says the run ended, with the error among its reasons.
TEST(DocumentWriter, ARunEndedByAnErrorAfterACheckpointSaysSo) {
  PairRun run("error", "pull,push", "1", "kv-dsv4-b256-tcp-isl8k-b1");
  ASSERT_TRUE(run.pair.initiator.ok()) << run.pair.initiator.status().message();
  {
    DocumentWriter writer(run.initiator(), nlohmann::json::object());
    writer.Checkpoint(run.Rows(1));
    ASSERT_EQ((*run.Document())["running"], true);
  }
  nlohmann::json doc = run.Document().value();
  EXPECT_FALSE(doc.contains("running")) << doc.dump();
  EXPECT_EQ(doc["complete"], false);
  EXPECT_EQ(doc["rows"].size(), 1u);
  EXPECT_EQ(doc["outcome"]["valid"], false);
  EXPECT_NE(doc["outcome"]["reasons"].dump().find("the run ended with an error before its final "
                                                  "document was written"),
            std::string::npos)
      << doc["outcome"].dump();

  // A reason given by the caller is the one recorded; a final document is never undone.
  {
    DocumentWriter writer(run.initiator(), nlohmann::json::object());
    writer.Checkpoint(run.Rows(1));
    writer.EndWithError("a control message of an unexpected shape: x");
  }
  doc = run.Document().value();
  EXPECT_EQ(doc["outcome"]["reasons"][0], "a control message of an unexpected shape: x");
  {
    DocumentWriter writer(run.initiator(), nlohmann::json::object());
    writer.Checkpoint(run.Rows(1));
    ASSERT_TRUE(writer.Write(writer.Final(run.Rows(2))).ok());
  }
  doc = run.Document().value();
  EXPECT_EQ(doc["complete"], true);
  EXPECT_EQ(doc["outcome"]["valid"], true) << doc["outcome"].dump();
}

// With no checkpoint written, nothing is: an earlier document of the case stays.
TEST(DocumentWriter, NoCheckpointNoDocument) {
  PairRun run("none", "pull,push", "1", "kv-dsv4-b256-tcp-isl8k-b1");
  ASSERT_TRUE(run.pair.initiator.ok()) << run.pair.initiator.status().message();
  { DocumentWriter writer(run.initiator(), nlohmann::json::object()); }
  EXPECT_EQ(CaseName(*run.initiator()), run.doc);  // so none is there by that name
  EXPECT_FALSE(run.Document().has_value());
}

// The finding: the document did not say which host memory bound applied. The pool
// section records this rank's bound and, on one host, the one both pools shared.
TEST(DocumentWriter, TheDocumentRecordsTheHostMemoryBounds) {
  PairRun run("bounds", "pull", "1", "kv-dsv4-b256-tcp-isl8k-b1-pull");
  ASSERT_TRUE(run.pair.initiator.ok()) << run.pair.initiator.status().message();
  DocumentWriter writer(run.initiator(), nlohmann::json::object());
  const CaseDocument doc = writer.Final(run.Rows(1));
  const nlohmann::json& pool = doc.implementation["pool"];
  ASSERT_TRUE(pool.contains("host_memory_bound")) << pool.dump();
  EXPECT_GT(pool["host_memory_bound"]["bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(pool["host_memory_bound"]["description"], run.initiator()->host_bound().description);
  EXPECT_NE(pool["host_memory_bound"]["description"].get<std::string>().find("GiB"),
            std::string::npos);
  ASSERT_TRUE(pool.contains("shared_host_memory_bound")) << pool.dump();  // one host (tcp)
  EXPECT_GT(pool["shared_host_memory_bound"]["bytes"].get<uint64_t>(), 0u);
  writer.EndWithError("unused");  // no checkpoint: nothing written
  EXPECT_EQ(CaseName(*run.initiator()), run.doc);
  EXPECT_FALSE(run.Document().has_value());
}

}  // namespace
}  // namespace kvbench
