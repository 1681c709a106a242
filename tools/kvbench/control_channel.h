// ControlChannel: the control plane between the two kvbench ranks. One plain TCP
// connection carrying length-prefixed JSON messages (4-byte big-endian length,
// then UTF-8 JSON), every wait bounded by a timeout. Also carries raw bytes for
// the socket reference row. Owns its socket; one thread at a time, except that
// SendRaw and ReceiveRaw may run on two threads at once (one each, a relay) and
// Abort may come from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvlane/status.h"

namespace kvbench {

// While Accept or Connect still waits for the peer, `call` runs every `every`
// with the time waited so far: a progress line for a rank whose peer has not
// started yet, instead of minutes of silence. An empty `call` says nothing.
struct WaitNotice {
  std::function<void(std::chrono::milliseconds waited)> call;
  std::chrono::milliseconds every{std::chrono::seconds(10)};
};

class ControlChannel;

// A listening socket for the control plane: rank 0 keeps it open while it drops
// connections that are no kvbench rank (Session::Handshake), so that a rank 1
// connecting meanwhile waits in its queue instead of being reset with it. Owns
// the socket; one thread at a time.
class ControlListener {
 public:
  // Binds host:port and listens.
  static kvlane::Result<std::unique_ptr<ControlListener>> Listen(const std::string& host_port);
  // Takes over `fd`, a listening TCP socket on `host_port` that this rank's
  // launcher opened before starting it (RunConfig::listen_fd), and marks it
  // close-on-exec and non-blocking (Accept). InvalidArgument, `fd` left as it was, when it is no
  // listening TCP socket.
  static kvlane::Result<std::unique_ptr<ControlListener>> Adopt(int fd, std::string host_port);
  ~ControlListener();
  ControlListener(const ControlListener&) = delete;
  ControlListener& operator=(const ControlListener&) = delete;
  // The next peer: one already queued, else the first to connect within
  // `timeout` (kTimeout after it). The channel's timeout is `timeout`.
  kvlane::Result<std::unique_ptr<ControlChannel>> Accept(std::chrono::milliseconds timeout,
                                                         const WaitNotice& notice = {});
  // The port it listens on.
  kvlane::Result<uint16_t> Port() const;
  // The socket, still owned by this listener.
  int fd() const { return fd_; }
  // Gives the socket up: the caller owns it from now on (this listener is empty).
  int Release() { return std::exchange(fd_, -1); }

 private:
  ControlListener(int fd, std::string host_port) : fd_(fd), host_port_(std::move(host_port)) {}
  int fd_;
  std::string host_port_;
};

class ControlChannel {
 public:
  // Connects to host:port, retrying refused connections until the timeout; kTimeout
  // when it passes (refused all along, or no answer at all: each attempt is bounded
  // by it too); any other connect error fails at once.
  static kvlane::Result<std::unique_ptr<ControlChannel>> Connect(const std::string& host_port,
                                                                 std::chrono::milliseconds timeout,
                                                                 const WaitNotice& notice = {});
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  kvlane::Status Send(const nlohmann::json& message);
  // Waits at most timeout() for the next message. With a `stop`, asks it every
  // kStopPoll while no byte of the message has come: kCanceled, nothing read (the
  // connection still framed), once it answers true.
  kvlane::Result<nlohmann::json> Receive(const std::function<bool()>& stop = {});
  // Receives a message and checks its "type"; a peer "error" message becomes an error.
  kvlane::Result<nlohmann::json> Expect(const std::string& type);
  // The same, for a message of any of `types`; `stop` as for Receive.
  kvlane::Result<nlohmann::json> ExpectOneOf(const std::vector<std::string>& types,
                                             const std::function<bool()>& stop = {});
  // Whether something is there to read now (a message, or the peer's close),
  // without waiting or reading it. False once aborted.
  bool Pending() const;

  // How often a Receive with a `stop` asks it.
  static constexpr std::chrono::milliseconds kStopPoll{100};

  kvlane::Status SendRaw(const void* data, uint64_t len);
  kvlane::Status ReceiveRaw(void* data, uint64_t len);

  // Ends the connection in both directions, for when the raw bytes no longer
  // line up with what the peer expects (a socket reference failed partway): the
  // peer's wait ends at once (peer closed, or a failed send) instead of at its
  // timeout, and every later call here fails without touching the socket. Bytes
  // already sent still reach the peer. Idempotent. Receive calls it itself when a
  // message came in part, too long or with a wrong MAC (the framing is lost), and
  // a Send when it fails (part of it may have gone out; sealed: its number is spent).
  void Abort();
  bool aborted() const { return aborted_; }

  // This end's IP address on the connection (getsockname), e.g. "10.0.0.5":
  // the local interface that reaches the peer, so a data listener bound to it
  // is reachable from the peer's host too.
  kvlane::Result<std::string> LocalAddress() const;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // A bound on a whole exchange (the handshake's), not on each wait: until
  // cleared, no wait ends later than `by` (kTimeout then), however the peer
  // paces its bytes; and no message longer than `max_bytes` is taken.
  void Bound(std::chrono::steady_clock::time_point by, uint32_t max_bytes);
  void Unbound();
  // The peer's address, e.g. "10.0.0.7:41234"; "?" when unknown.
  std::string PeerAddress() const;

  // From now on every message sent carries MessageMac(send_key, n) of its bytes
  // (n: messages sent since), and every message received must carry
  // MessageMac(receive_key, m) (m: messages received since), else Receive fails
  // with kInvalidArgument and aborts the channel: a message altered, injected,
  // replayed, reordered or dropped on the way is not taken. Raw bytes
  // (SendRaw, ReceiveRaw) carry none. Both ends seal at the same point of their
  // exchange (control_secret.h: ControlMacKey). REQUIRES: 32-byte keys.
  void Seal(std::string send_key, std::string receive_key);
  bool sealed() const { return !send_key_.empty(); }

 private:
  friend class ControlListener;
  ControlChannel(int fd, std::chrono::milliseconds timeout);
  kvlane::Status WaitReady(short events);
  kvlane::Status WaitReadable(const std::function<bool()>& stop);
  // Receive's parts once something is there to read: the next message's bytes
  // (its MAC checked and cut off when sealed), then the JSON object they hold.
  kvlane::Result<std::string> ReceiveFrame();
  static kvlane::Result<nlohmann::json> ParseMessage(const std::string& body);

  int fd_;
  std::chrono::milliseconds timeout_;
  std::optional<std::chrono::steady_clock::time_point> by_;  // Bound's
  uint32_t max_message_;
  std::atomic<bool> aborted_{false};    // Abort may come from another thread
  std::string send_key_, receive_key_;  // Seal's; empty: not sealed
  uint64_t sent_ = 0, received_ = 0;    // messages since the seal
};

// Splits "host:port"; fails on a missing or bad port.
kvlane::Status SplitHostPort(const std::string& host_port, std::string* host, uint16_t* port);

// Whether the connected socket `fd` is connected to itself: a connect to a
// loopback port nobody listens on yet can meet its own SYN when the kernel
// picks that port as the source (a simultaneous open); it then holds the port
// its listener wants. ControlChannel::Connect counts it as refused and retries.
bool ConnectedToItself(int fd);

}  // namespace kvbench
