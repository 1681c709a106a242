// Text rendering of the lanebench document: the preamble (environment, config,
// method) before any run, and the review tables after.
#pragma once

#include <cstdio>

#include "document.h"

namespace lanebench {

// The document's "environment" is common/environment.h's HostEnvironment(), with
// "loadavg_end" added after the runs.
void PrintPreamble(const Doc& doc, std::FILE* out);
void PrintResults(const Doc& doc, std::FILE* out);

}  // namespace lanebench
