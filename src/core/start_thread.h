// StartThread: a thread started with no exception crossing the API.
#pragma once

#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "kvlane/status.h"

namespace kvlane::core {

// Runs `fn` on a new thread, stored in *t. A thread that cannot be made (the
// process or its cgroup at its thread limit, which a flood of connections may
// bring about: EAGAIN; or no memory) is a kBackend status naming `what`, and
// *t is left as it was (not joinable when it was not).
template <typename F>
Status StartThread(std::thread* t, const char* what, F&& fn) {
  try {
    *t = std::thread(std::forward<F>(fn));
    return Status::Ok();
  } catch (const std::system_error& e) {
    return Status::Backend(std::string("cannot start the ") + what + " thread: " + e.what());
  } catch (const std::bad_alloc&) {
    return Status::Backend(std::string("cannot start the ") + what + " thread: out of memory");
  }
}

}  // namespace kvlane::core
