// The pybind11 headers of every file of the module: one set of type casters
// everywhere (a caster header included by some files and not others breaks
// the one-definition rule), and the `py` alias.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace kvlane::python {

namespace py = pybind11;

}  // namespace kvlane::python
