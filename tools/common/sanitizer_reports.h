// Sanitizer reports of the processes a tool's test starts (a kvbench launcher and
// its ranks, a lanebench orchestrator and its workers). Such a process may have its
// stderr sent to /dev/null or a file, or end by a signal (a stop test's, where
// ThreadSanitizer's exit code never shows, or SIGABRT from abort_on_error, which the
// launcher reports as an ordinary error exit): its report could pass unseen.
// Including this header in a test file of a sanitized build sends the reports of
// every process its tests start to a file of their own (the sanitizers' log_path,
// in a fresh directory) and fails the test during which one was written, showing
// it. The test process's own reports stay on its stderr (its options were read
// when it started). Nothing changes in a build without a sanitizer.
#pragma once

namespace kvlane_tools {

// Registers the watch with GoogleTest (before its tests run); true when sanitized.
bool WatchChildSanitizerReports();

[[maybe_unused]] inline const bool kChildSanitizerReportsWatched = WatchChildSanitizerReports();

}  // namespace kvlane_tools
