// kvlane.Agent's descriptor lists, transfers and notifications.
#include "agent.h"
#include "bindings.h"
#include "descs.h"
#include "status.h"
#include "transfer.h"

namespace kvlane::python {
namespace {

PyPrepared Prepare(PyAgent& self, std::optional<std::string> peer, py::handle descs,
                   const std::string& kind) {
  const DescList list = ToDescList(descs, ParseKind(kind));
  Result<PreparedId> id = self.Blocking(
      [&](Agent& a) { return peer ? a.PrepareRemote(*peer, list) : a.PrepareLocal(list); });
  return PyPrepared{self.serial(), ValueOrRaise(std::move(id)), list.descs.size(),
                    peer.value_or(""), list.kind};
}

std::unique_ptr<PyTransfer> MakeTransfer(py::object self, const std::string& op,
                                         const PyPrepared& local, const PyPrepared& remote,
                                         const std::string& notif, py::handle local_idx,
                                         py::handle remote_idx, std::optional<int> lane,
                                         bool stripe) {
  PyAgent& a = self.cast<PyAgent&>();
  a.CheckOwner(local.owner, "the local list");
  a.CheckOwner(remote.owner, "the remote list");
  const Op o = ParseOp(op);
  const std::vector<uint32_t> li = ToIndices(local_idx), ri = ToIndices(remote_idx);
  if (lane.has_value() && *lane < 0)
    throw py::value_error(
        "lane is a lane's index, 0 .. lanes_per_peer - 1 (None: the engine picks)");
  const XferOptions xo{lane.value_or(-1), stripe};
  a.ReleaseOrphans();  // slots of dropped transfers whose lanes have let go since
  const XferHandle h = ValueOrRaise(a.Blocking([&](Agent& agent) {  // may connect
    return agent.MakeTransfer(o, local.id, li, remote.id, ri, notif, xo);
  }));
  Result<XferInfo> info = a.agent().Describe(h);
  return std::make_unique<PyTransfer>(std::move(self), h, o, info.ok() ? info->chunks : UINT32_MAX,
                                      !notif.empty());
}

py::list TakeNotifications(PyAgent& self) {
  py::list out;
  for (Notification& n : self.agent().TakeNotifications())
    out.append(py::make_tuple(LossyStr(n.peer), py::bytes(n.bytes)));
  return out;
}

}  // namespace

void DefTransfers(AgentClass& c) {
  c.def(
       "prepare_local",
       [](PyAgent& a, py::handle descs, const std::string& kind) {
         return Prepare(a, std::nullopt, descs, kind);
       },
       py::arg("descs"), py::arg("kind") = "host",
       R"(Resolves a list of this agent's registered ranges once; returns a Prepared.

descs: a list of (addr, len) or (addr, len, device) tuples, or an integer array of shape
    (n, 2) or (n, 3) (numpy int64/uint64: read without a Python call per descriptor).
A range outside every registered region raises kvlane.Error. A Prepared is not freed when
dropped: the engine keeps the list (and, for a remote list, its peer's connections) until
release_prepared or close().)")
      .def(
          "prepare_remote",
          [](PyAgent& a, const std::string& peer, py::handle descs, const std::string& kind) {
            return Prepare(a, peer, descs, kind);
          },
          py::arg("peer"), py::arg("descs"), py::arg("kind") = "host",
          "Like prepare_local, for ranges (addresses in the peer's process) of a loaded peer's "
          "regions.")
      .def(
          "release_prepared",
          [](PyAgent& a, const PyPrepared& p) {
            a.CheckOwner(p.owner, "this list");
            // GIL released: the last list of a removed peer closes its channels.
            RaiseIfError(a.Blocking([&](Agent& ag) { return ag.ReleasePrepared(p.id); }));
          },
          py::arg("prepared"), "Forgets a prepared list; transfers made from it keep working.")
      .def("make_transfer", &MakeTransfer, py::arg("op"), py::arg("local"), py::arg("remote"),
           py::arg("notif") = "", py::arg("local_idx") = py::none(),
           py::arg("remote_idx") = py::none(), py::arg("lane") = py::none(),
           py::arg("stripe") = true, R"(Pairs local and remote descriptors into a Transfer.

op: "write" (local to remote) or "read" (remote to local).
local_idx, remote_idx: which descriptors of each list, pair by pair (a sequence of ints or a
    1-D int array); None means all, in order. Paired lengths must match.
notif: bytes (a str goes as its UTF-8 bytes) delivered to the peer (take_notifications)
    after the data is visible there.
lane: pin every post to one lane, 0 .. lanes_per_peer - 1 (None: the engine picks; a larger
    one raises kvlane.Error INVALID_ARGUMENT, a negative one ValueError); stripe: allow
    striping bulk transfers over every lane.)")
      .def(
          "send_notification",
          [](PyAgent& a, const std::string& peer, const std::string& payload) {
            RaiseIfError(a.Blocking([&](Agent& ag) { return ag.SendNotification(peer, payload); }));
          },
          py::arg("peer"), py::arg("payload"),
          "Sends bytes (a str goes as its UTF-8 bytes) to a peer, ordered after this agent's "
          "finished WRITEs to it.")
      .def("take_notifications", &TakeNotifications,
           "Every notification received so far, as a list of (peer name, payload bytes).");
}

}  // namespace kvlane::python
