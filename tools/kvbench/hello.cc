#include "hello.h"

#include <fmt/format.h>

#include "json_field.h"
#include "kvlane/agent.h"

namespace kvbench {

using nlohmann::json;

kvlane::Status ReadHello(int my_rank, const json& m, RankInfo* peer) {
  auto integer = [&m](const char* key) { return TypedField<int64_t>(m, key); };
  // Kept to printable ASCII and cut: each goes into messages and documents.
  auto text = [&m](const char* key) -> std::optional<std::string> {
    auto t = TypedField<std::string>(m, key);
    return t ? std::optional(Printable(*t, 255)) : std::nullopt;
  };
  const std::optional<int64_t> protocol = integer("protocol");
  if (protocol != kControlProtocol) {
    return kvlane::Status::InvalidArgument(fmt::format(
        "the peer runs kvbench {} (control protocol {}), this rank {} (protocol {}): run the same "
        "build on both ranks",
        text("version").value_or("of an older build"),
        protocol ? std::to_string(*protocol) : "none", kvlane::VersionString(), kControlProtocol));
  }
  const std::optional<int64_t> rank = integer("rank");
  if (rank != 1 - my_rank) {
    return kvlane::Status::InvalidArgument(
        fmt::format("the peer's hello claims rank {}, this rank is {}: one rank 0 (--rank 0, the "
                    "target) and one rank 1",
                    rank ? std::to_string(*rank) : "none", my_rank));
  }
  peer->rank = 1 - my_rank;
  peer->role = text("role").value_or("");
  peer->hostname = text("hostname").value_or("");
  peer->devices = PeerStrings(FieldOrNull(m, "devices"), 64, 255);
  peer->version = text("version").value_or("");
  // The same control protocol from another build runs on: said, and recorded
  // (topology.ranks[].version), so a document ties each rank to its build.
  if (peer->version != kvlane::VersionString())
    fmt::print(stderr, "[kvbench] note: the peer runs {}, this rank {} (same control protocol)\n",
               peer->version.empty() ? std::string("an unnamed build") : peer->version,
               kvlane::VersionString());
  return kvlane::Status::Ok();
}

kvlane::Status NotAPeer(int my_rank, const std::string& peer, const kvlane::Status& cause) {
  if (my_rank == 0) {  // whatever connected to our port: it is dropped (Session::Handshake)
    return kvlane::Status(cause.code(), fmt::format("a connection to {} sent no kvbench hello ({})",
                                                    peer, cause.message()));
  }
  const std::string who = "the listener at " + peer;
  if (cause.code() == kvlane::Code::kInvalidArgument) {
    return kvlane::Status::InvalidArgument(fmt::format(
        "{} did not answer with a kvbench hello ({}): is {} the control port rank 0 listens on "
        "(--peer), and do both ranks run the same kvbench?",
        who, cause.message(), peer));
  }
  if (cause.code() == kvlane::Code::kRemoteDisconnect) {
    return kvlane::Status::RemoteDisconnect(fmt::format(
        "{} closed the connection before its hello ({}): a kvbench rank that failed (its output "
        "says why), or no kvbench rank at all (is {} the port rank 0 listens on?)",
        who, cause.message(), peer));
  }
  if (cause.code() == kvlane::Code::kTimeout) {  // a kvbench rank says hello as it connects
    return kvlane::Status::Timeout(fmt::format(
        "{} sent no hello ({}): a kvbench rank sends its own at once; is {} the port rank 0 "
        "listens on (--peer)?",
        who, cause.message(), peer));
  }
  return cause;
}

}  // namespace kvbench
