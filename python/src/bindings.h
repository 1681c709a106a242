// The parts of the kvlane module, each defined in its own file; module.cc
// calls the Bind functions in this order at import.
#pragma once

#include "agent.h"
#include "pybind.h"

namespace kvlane::python {

void BindStatus(py::module_& m);     // status.cc: Code, Error
void BindValues(py::module_& m);     // values_bind.cc: Region, Prepared
void BindTransfer(py::module_& m);   // transfer_bind.cc: Transfer, TransferInfo
void BindAgent(py::module_& m);      // agent_bind.cc: Agent
void BindFunctions(py::module_& m);  // module.cc: version, fetch_metadata, ensure_memlock

// kvlane.Agent's lists, transfers and notifications (agent_transfers_bind.cc),
// called by BindAgent.
using AgentClass = py::class_<PyAgent>;
void DefTransfers(AgentClass& c);

}  // namespace kvlane::python
