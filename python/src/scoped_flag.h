// ScopedFlag: sets a binding object's bool for a scope and clears it on the way
// out, an exception included (a call that released the GIL and raised). The bool
// is GIL-guarded state; the destructor runs with the GIL held, after WithoutGil
// took it back.
#pragma once

namespace kvlane::python {

class ScopedFlag {
 public:
  explicit ScopedFlag(bool* flag) : flag_(flag) { *flag_ = true; }
  ~ScopedFlag() { *flag_ = false; }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;

 private:
  bool* flag_;
};

}  // namespace kvlane::python
