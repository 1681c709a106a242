// kvlane.Transfer and kvlane.TransferInfo.
#include "bindings.h"
#include "transfer.h"

namespace kvlane::python {

void BindTransfer(py::module_& m) {
  py::class_<XferInfo>(m, "TransferInfo",
                       "How make_transfer planned a transfer (Transfer.describe()).")
      .def_readonly("bytes", &XferInfo::bytes, "Payload of one post.")
      .def_readonly("pairs", &XferInfo::pairs, "Descriptor pairs given to make_transfer.")
      .def_readonly("segments", &XferInfo::segments,
                    "Contiguous ranges after cutting at pieces and merging adjacent pairs.")
      .def_readonly("chunks", &XferInfo::chunks, "Units the lanes move (at most chunk_bytes each).")
      .def("__repr__", [](const XferInfo& i) {
        return "TransferInfo(bytes=" + std::to_string(i.bytes) +
               ", pairs=" + std::to_string(i.pairs) + ", segments=" + std::to_string(i.segments) +
               ", chunks=" + std::to_string(i.chunks) + ")";
      });

  py::class_<PyTransfer>(m, "Transfer",
                         R"(A prepared transfer (Agent.make_transfer), posted any number of times.

Post it, then poll check() or block in wait(); post again once the previous post
has finished. It keeps its Agent alive; after Agent.close() every call but
release() raises ValueError. Used by one thread at a time (a call while another
thread is inside post/wait/release raises RuntimeError; check() is always allowed).
Dropping it releases it without waiting for a stalled peer: a post still in flight is
canceled where no lane has started it, and a lane that has keeps moving its bytes until it
finishes (the slot is freed by a later make_transfer or close()); wait() before dropping a
transfer whose buffers are to be reused. (A post a GPU published may hold the drop up to
io_timeout_s.))")
      .def("post", &PyTransfer::Post, R"(Starts moving the bytes; returns Code.IN_PROGRESS (or OK).

REQUIRES: the previous post has finished (else kvlane.Error NOT_ALLOWED) and the bytes to
move are in place (for device memory: the work that wrote them has completed). Raises
kvlane.Error. Releases the GIL for transfers of more than 64 chunks, for transfers with a
notification (the posting thread may send it), while another thread is inside a call of the
agent that released the GIL, and for any transfer whose lane ring lacks room for it (many
posts queued behind a stalled peer: the post may wait up to post_timeout_s); otherwise a
small post keeps it.)")
      .def("check", &PyTransfer::Check,
           R"(Code.IN_PROGRESS or Code.OK; raises kvlane.Error if the post failed.

One load of the transfer's record: cheap enough to spin on. A transfer never posted reads OK.)")
      .def("wait", &PyTransfer::Wait, py::arg("timeout_s") = py::none(),
           R"(Blocks (GIL released) until the post ends or `timeout_s` seconds pass.

Returns Code.OK when it finished, Code.IN_PROGRESS when the timeout passed first (the
transfer goes on); raises kvlane.Error when it failed. None waits for as long as it takes
(Ctrl-C interrupts it).)")
      .def("cancel", &PyTransfer::Cancel,
           R"(Cancels a post no lane has started (it then ends as CANCELED).

A post a lane already owns raises kvlane.Error NOT_ALLOWED (wait for it instead); a
finished one is left as it is.)")
      .def("release", &PyTransfer::Release,
           R"(Frees the transfer's slot; the object is unusable afterwards.

An in-flight post is canceled first; if a lane still owns it, kvlane.Error NOT_ALLOWED and
the transfer stays usable. A canceled post queued behind others is released once its lane
reaches it, which behind a stalled peer may take up to the agent's io_timeout (GIL
released; dropping the transfer instead does not wait). It may also block up to io_timeout
while the lane of a post the GPU published lets go; past it, kvlane.Error TIMEOUT, the
transfer usable. Calling it again does nothing.)")
      .def("describe", &PyTransfer::Describe, "A TransferInfo: bytes, pairs, segments, chunks.")
      .def_property_readonly(
          "op", [](const PyTransfer& t) { return std::string(OpName(t.op())); },
          "\"read\" or \"write\".")
      .def_property_readonly("released", &PyTransfer::released, "True after release().")
      .def("__repr__", [](const PyTransfer& t) {
        return std::string("<kvlane.Transfer ") + OpName(t.op()) +
               (t.released() ? " released>" : ">");
      });
}

}  // namespace kvlane::python
