// AgentOptions from Python keyword arguments, and back. The names are
// AgentOptions' field names; durations are float seconds with a `_s` suffix
// (post_timeout_s, spin_s, ...); enums are their engine names ("global-fifo",
// "kernel"). Needs the GIL.
#pragma once

#include <string>

#include "kvlane/options.h"
#include "pybind.h"

namespace kvlane::python {

// Options named `name` with every keyword of `kwargs` applied. Raises TypeError
// for an unknown keyword or a value of the wrong type, ValueError for a
// duration that is not finite, kvlane.Error for a bad enum name. The engine
// validates the rest at Agent creation.
AgentOptions OptionsFromKwargs(const std::string& name, const py::kwargs& kwargs);

// Every field the keywords can set, by keyword name (Agent.options).
py::dict OptionsToDict(const AgentOptions& o);

// "name, policy, transports, ...": the accepted keywords, for docstrings.
std::string OptionNames();

}  // namespace kvlane::python
