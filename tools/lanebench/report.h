// Text rendering of the lanebench document: the preamble (environment, config,
// method) before any run, and the review tables after.
#pragma once

#include <cstdio>

#include "document.h"

namespace lanebench {

// Host name, CPUs, kernel, time: printed before results and stored in the document.
Doc Environment();
// "/proc/loadavg"'s three averages ("0.52 0.61 0.70").
std::string LoadAverage();

void PrintPreamble(const Doc& doc, std::FILE* out);
void PrintResults(const Doc& doc, std::FILE* out);

}  // namespace lanebench
