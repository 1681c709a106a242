#include "core/staging_quota.h"

namespace kvlane::core {

StagingQuota::Ticket& StagingQuota::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    Give();
    quota_ = o.quota_;
    holder_ = std::move(o.holder_);
    o.quota_ = nullptr;
  }
  return *this;
}

void StagingQuota::Ticket::Give() {
  if (quota_ == nullptr) return;
  std::lock_guard lock(quota_->mu_);
  --quota_->alive_;
  if (!holder_.empty() && --quota_->by_holder_[holder_] == 0) quota_->by_holder_.erase(holder_);
  quota_ = nullptr;
}

Result<StagingQuota::Ticket> StagingQuota::Take(const std::string& holder) {
  std::lock_guard lock(mu_);
  if (alive_ >= process_cap_) {
    return Status::NotAllowed("tcp: " + std::to_string(process_cap_) +
                              " staging buffers are in use in this process (2 MiB pinned each)");
  }
  if (!holder.empty()) {
    int& held = by_holder_[holder];
    if (held >= peer_cap_) {
      return Status::NotAllowed("tcp: the connections of peer '" + holder + "' hold " +
                                std::to_string(peer_cap_) +
                                " staging buffers, a peer's cap (2 MiB pinned each)");
    }
    ++held;
  }
  ++alive_;
  return Ticket(this, holder);
}

int StagingQuota::alive() const {
  std::lock_guard lock(mu_);
  return alive_;
}

int StagingQuota::alive(const std::string& holder) const {
  std::lock_guard lock(mu_);
  auto it = by_holder_.find(holder);
  return it == by_holder_.end() ? 0 : it->second;
}

StagingQuota& ProcessStagingQuota() {
  static StagingQuota* const quota =
      new StagingQuota(kMaxStagingCopiers, kMaxStagingCopiersPerPeer);
  return *quota;  // never freed: copiers of threads still running may give back late
}

}  // namespace kvlane::core
