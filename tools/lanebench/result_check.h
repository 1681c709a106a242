// The source's result.json as the orchestrator takes it: the file another
// process wrote is untrusted input, so its shape is checked once, where it is
// read (Reap), and everything after (RunValid, RunSeries, the document, the
// progress line) reads a value of the expected types. Pure logic; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "spec.h"

namespace lanebench {

// `result` when its fields have their types: "ok" a bool; "error", "warning",
// "first_failure" and "transport" strings (kept to printable ASCII and cut at 512
// bytes); the counts (iterations, verified, warmup_verified, failed, poller_cpu)
// integers; failed_iterations an array of integers; window_us and gap_us arrays
// of numbers; lat_us, done_us, done_sweep, post_us and stall_us objects of arrays
// of numbers; host_stalls an object of numbers. A result that says "ok" must also
// count `spec.iters` iterations, all verified, with that many samples in each
// lat_us series. Otherwise {"ok": false, "error": why}: the run failed.
nlohmann::json CheckedResult(nlohmann::json result, const RunSpec& spec);

// The exit code of a source that wrote `written` (its result.json as read, before
// CheckedResult): 0 when it says "ok": true, else 1 (source.cc). Taken from the
// file as written: a result CheckedResult refuses is not a reason to expect the
// source to have failed, nor to warn that it did not exit cleanly.
int ExpectedSourceExit(const nlohmann::json& written);

}  // namespace lanebench
