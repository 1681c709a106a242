// ConnSet<C>: the connection half of a server that gives every accepted
// connection a thread of its own (the stream transports' StreamServer and the
// cuda transport's ControlServer, the metadata listener): the accept loop,
// reaping of finished connections, a cap on how many are served at once, and Stop.
//
// C must provide `Fd fd`, `std::thread thread` and `bool done` (GUARDED_BY(mu())).
// A connection's thread calls Finish(c) as its last step.
//
// Thread-safety: Start/Stop from the owner; Finish from connection threads; mu()
// guards conns() and every C::done, and cv() is notified when they change.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "core/start_thread.h"
#include "transport/stream/socket.h"

namespace kvlane::core {

template <class C>
class ConnSet {
 public:
  // Connections served at once (each holds a thread); more are closed at accept.
  static constexpr size_t kMaxConns = 4096;
  // How long the accept loop waits after accept failed (e.g. EMFILE).
  static constexpr std::chrono::milliseconds kAcceptRetry{10};

  ConnSet() = default;
  ~ConnSet() { Stop(); }
  ConnSet(const ConnSet&) = delete;
  ConnSet& operator=(const ConnSet&) = delete;

  // Takes ownership of a listening socket; every accepted connection runs
  // serve(c) on a thread of its own. An accept thread that cannot start is an
  // error (the listener is closed with the set).
  Status Start(Fd listener, std::function<void(C*)> serve) {
    listener_ = std::move(listener);
    serve_ = std::move(serve);
    return StartThread(&accept_thread_, "accept", [this] { AcceptLoop(); });
  }

  // Stops accepting, cuts every connection, joins every thread. Idempotent.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      if (listener_.valid()) shutdown(listener_.get(), SHUT_RDWR);
      for (auto& c : conns_) shutdown(c->fd.get(), SHUT_RDWR);
    }
    if (accept_thread_.joinable()) accept_thread_.join();
    for (auto& c : conns_) c->thread.join();
    conns_.clear();
  }

  // The connection's thread is about to return. Its descriptor is closed here,
  // not when the connection is reaped (at a later accept, which may need that
  // very descriptor to succeed), and not under mu(): a close may block (a
  // descriptor the peer left queued on the connection closes with it), and
  // the accept loop and Stop take mu(). REQUIRES: no other thread uses c->fd
  // any more.
  void Finish(C* c) {
    Fd fd;
    {
      std::lock_guard lock(mu_);
      fd = std::move(c->fd);  // Stop's shutdown of it: nothing left to cut
    }
    fd.Reset();
    std::lock_guard lock(mu_);
    c->done = true;
    cv_.notify_all();
  }

  std::mutex& mu() { return mu_; }
  std::condition_variable& cv() { return cv_; }
  std::list<std::unique_ptr<C>>& conns() { return conns_; }  // REQUIRES: mu() held
  bool stopped() const { return stopped_; }                   // REQUIRES: mu() held

 private:
  void AcceptLoop() {
    for (;;) {
      auto fd = Accept(listener_.get());
      {
        std::lock_guard lock(mu_);
        if (stopped_) return;
        ReapLocked();
        if (fd.ok()) {
          if (conns_.size() < kMaxConns) Spawn(std::move(fd).value());
          continue;  // else the fd closes here: refuse, keep serving the rest
        }
      }
      if (fd.status().code() == Code::kCanceled) return;
      // A failure that persists (EMFILE, ENFILE, ENOBUFS) leaves the connection
      // queued and the listener readable: wait rather than spin on it.
      std::this_thread::sleep_for(kAcceptRetry);
    }
  }

  // Joins finished connections so long-running servers do not accumulate them.
  // REQUIRES: mu_ held.
  void ReapLocked() {
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done) {
        (*it)->thread.join();
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Serves `fd` on a thread of its own, or refuses it (closes it) when no
  // thread can be made (the process or its cgroup at its thread limit, which a
  // flood of connections may bring about: EAGAIN) or memory runs out: an
  // exception out of the accept thread would end the process. REQUIRES: mu_ held.
  void Spawn(Fd fd) {
    try {
      conns_.push_back(std::make_unique<C>());  // before the thread: no throw after it
    } catch (const std::bad_alloc&) {
      return;
    }
    C* raw = conns_.back().get();
    raw->fd = std::move(fd);
    try {
      raw->thread = std::thread([this, raw] { serve_(raw); });
    } catch (const std::exception&) {  // std::system_error, or std::bad_alloc
      conns_.pop_back();               // never started: closes the connection
    }
  }

  Fd listener_;
  std::function<void(C*)> serve_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::unique_ptr<C>> conns_;  // GUARDED_BY(mu_)
  bool stopped_ = false;                 // GUARDED_BY(mu_)
};

}  // namespace kvlane::core
