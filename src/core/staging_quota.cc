#include "core/staging_quota.h"

#include <atomic>
#include <cassert>

namespace kvlane::core {
namespace {

std::atomic<StagingQuota*> test_quota{nullptr};

}  // namespace

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
  if (!holder_.empty()) {
    auto it = quota_->by_holder_.find(holder_);
    assert(it != quota_->by_holder_.end() && it->second > 0);  // Take counted it
    if (it != quota_->by_holder_.end() && --it->second == 0) quota_->by_holder_.erase(it);
  }
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
  if (StagingQuota* q = test_quota.load(std::memory_order_acquire)) return *q;
  static StagingQuota* const quota =
      new StagingQuota(kMaxStagingCopiers, kMaxStagingCopiersPerPeer);
  return *quota;  // never freed: copiers of threads still running may give back late
}

void SetStagingQuotaForTest(StagingQuota* q) { test_quota.store(q, std::memory_order_release); }

}  // namespace kvlane::core
