// kvlane::Agent: the public face; every call forwards to core::AgentImpl.
#include "kvlane/agent.h"

#include "core/agent_impl.h"
#include "kvlane/version.h"

namespace kvlane {

Result<std::unique_ptr<Agent>> Agent::Create(const AgentOptions& options) {
  KVLANE_ASSIGN_OR_RETURN(auto impl, core::AgentImpl::Create(options));
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Agent::Agent(std::unique_ptr<core::AgentImpl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;
Status Agent::Close() { return impl_->Close(); }

const std::string& Agent::name() const { return impl_->context().name; }
const AgentOptions& Agent::options() const { return impl_->context().options; }
uint16_t Agent::metadata_port() const { return impl_->metadata_port(); }

Result<RegionId> Agent::RegisterMemory(void* addr, uint64_t len, MemoryKind kind, int32_t device,
                                       Access access) {
  return impl_->RegisterMemory(addr, len, kind, device, access);
}
Status Agent::DeregisterMemory(RegionId region) { return impl_->DeregisterMemory(region); }
Result<std::string> Agent::ExportMetadata() const { return core::EncodeMeta(impl_->SelfMeta()); }
Result<std::string> Agent::LoadPeer(std::string_view blob) { return impl_->LoadPeer(blob); }
Status Agent::RemovePeer(std::string_view peer) { return impl_->RemovePeer(peer); }
Result<std::string> Agent::PeerTransport(std::string_view peer, MemoryKind kind) {
  return impl_->PeerTransport(peer, kind);
}
Result<PreparedId> Agent::PrepareLocal(const DescList& list) { return impl_->PrepareLocal(list); }
Result<PreparedId> Agent::PrepareRemote(std::string_view peer, const DescList& list) {
  return impl_->PrepareRemote(peer, list);
}
Status Agent::ReleasePrepared(PreparedId id) { return impl_->ReleasePrepared(id); }

Result<XferHandle> Agent::MakeTransfer(Op op, PreparedId local, std::span<const uint32_t> local_idx,
                                       PreparedId remote, std::span<const uint32_t> remote_idx,
                                       std::string_view notif, XferOptions xo) {
  return impl_->MakeTransfer(op, local, local_idx, remote, remote_idx, notif, xo);
}

Status Agent::Post(XferHandle* handle) { return impl_->Post(handle); }
bool Agent::PostMayWait(const XferHandle& handle) const { return impl_->PostMayWait(handle); }
Status Agent::Check(const XferHandle& handle) const { return impl_->Check(handle); }
Result<XferInfo> Agent::Describe(const XferHandle& handle) const { return impl_->Describe(handle); }
Status Agent::Wait(const XferHandle& handle, std::chrono::nanoseconds timeout) const {
  return impl_->Wait(handle, timeout);
}
Status Agent::Cancel(const XferHandle& handle) { return impl_->Cancel(handle); }
Status Agent::Release(XferHandle* handle) { return impl_->Release(handle); }
Status Agent::SendNotification(std::string_view peer, std::string_view bytes) {
  return impl_->SendNotification(peer, bytes);
}
std::vector<Notification> Agent::TakeNotifications() { return impl_->TakeNotifications(); }
Status Agent::PeerError(std::string_view peer) const { return impl_->PeerError(peer); }

std::string VersionString() {
  return std::string("kvlane ") + KVLANE_VERSION_STRING + " (git " + KVLANE_GIT_REVISION + ")";
}

}  // namespace kvlane
