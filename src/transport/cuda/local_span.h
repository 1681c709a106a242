// What the cuda channel has judged of one local piece: whether a copy's
// destination bytes there are all memory of the channel's GPU (then a
// device-scope fence orders them before the record). Plain C++, no CUDA: the
// driver is behind the `judge` a caller passes (CudaChannel::OnThisDevice).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvlane::core {

// The span [lo, hi) of a piece judged so far, the hull of the segments seen in
// it, and whether all of it is this GPU's memory. A VMM range may map several
// devices' memory, or host memory, back to back, so a piece is judged on every
// byte a table touches; a repeated build of the same segments asks nothing.
// Once off this GPU, always off. Not thread-safe (the channel's build lock).
class LocalSpan {
 public:
  // A piece first seen at `addr`, whose memory kind there says `on_device`
  // (false: host memory or another GPU's, and nothing more is asked).
  LocalSpan(uint64_t addr, bool on_device) : lo_(addr), hi_(addr), on_device_(on_device) {}

  // Widens the span to cover [addr, addr + len), asking `judge(from, n)`
  // (whether every byte of [from, from + n) is this GPU's memory) only about
  // bytes outside the span: the gap between it and the segment included, which
  // lies in the same piece. Returns whether the whole span is on this GPU.
  // REQUIRES: len > 0, addr + len does not wrap, the segment is in the piece.
  template <class Judge>
  bool Cover(uint64_t addr, uint64_t len, Judge&& judge) {
    if (!on_device_) return false;
    const uint64_t end = addr + len;
    if (addr < lo_) {
      on_device_ = on_device_ && judge(addr, lo_ - addr);
      lo_ = addr;
    }
    if (end > hi_) {
      on_device_ = on_device_ && judge(hi_, end - hi_);
      hi_ = end;
    }
    return on_device_;
  }

  uint64_t lo() const { return lo_; }
  uint64_t hi() const { return hi_; }

 private:
  uint64_t lo_, hi_;
  bool on_device_;
};

// The channel's LocalSpans, by local piece key. A piece deregistered locally
// leaves no trace in the channel by itself, so before a new piece is added,
// once the map has reached its sweep mark (twice its size after the last
// sweep, at least kMinSweepMark), every entry whose key the registry no longer
// holds is dropped: a channel that sees many registration cycles keeps about
// twice the pieces still registered, at amortized O(1) per new piece. A
// dropped key seen again is judged afresh. Not thread-safe (the channel's
// build lock).
class LocalSpans {
 public:
  static constexpr size_t kMinSweepMark = 256;

  // The span of piece `key`, or nullptr if none is held. The pointer stays
  // valid until the next Add (map nodes do not move; a sweep erases).
  LocalSpan* Find(uint64_t key) {
    auto it = spans_.find(key);
    return it == spans_.end() ? nullptr : &it->second;
  }

  // Adds `span` for `key` (REQUIRES: Find(key) == nullptr), sweeping first if
  // the mark is reached: `registered(keys)` says, for every key held, whether
  // it still names a local piece (a std::vector<bool> in the keys' order; one
  // registry lock for the whole sweep).
  template <class Registered>
  LocalSpan* Add(uint64_t key, LocalSpan span, Registered&& registered) {
    if (spans_.size() >= sweep_mark_) {
      std::vector<uint64_t> keys;
      keys.reserve(spans_.size());
      for (const auto& kv : spans_) keys.push_back(kv.first);
      const std::vector<bool> live = registered(std::span<const uint64_t>(keys));
      for (size_t i = 0; i < keys.size(); ++i)
        if (i >= live.size() || !live[i]) spans_.erase(keys[i]);
      sweep_mark_ = std::max(kMinSweepMark, 2 * spans_.size());
    }
    return &spans_.emplace(key, span).first->second;
  }

  size_t size() const { return spans_.size(); }

 private:
  std::unordered_map<uint64_t, LocalSpan> spans_;
  size_t sweep_mark_ = kMinSweepMark;
};

}  // namespace kvlane::core
