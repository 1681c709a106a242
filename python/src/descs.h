// Descriptor lists and index lists from Python, and the names of memory kinds
// and ops. Every function needs the GIL and raises TypeError or ValueError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlane/descriptor.h"
#include "kvlane/memory.h"
#include "kvlane/transfer.h"
#include "pybind.h"

namespace kvlane::python {

// "host" or "cuda".
MemoryKind ParseKind(const std::string& kind);
// "read" or "write".
Op ParseOp(const std::string& op);

// A DescList of `kind` from either a sequence of (addr, len) or (addr, len,
// device) tuples, or an integer buffer of shape (n, 2) or (n, 3) (a numpy
// int64/uint64 array: read in C++, no Python call per descriptor).
DescList ToDescList(py::handle descs, MemoryKind kind);

// Descriptor indices from a sequence of ints or a 1-D integer buffer; None
// gives an empty vector ("all, in order").
std::vector<uint32_t> ToIndices(py::handle idx);

}  // namespace kvlane::python
