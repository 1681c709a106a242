#include "options.h"

#include <chrono>
#include <cmath>
#include <ratio>
#include <string_view>
#include <type_traits>
#include <utility>

#include "status.h"

namespace kvlane::python {
namespace {

// Float seconds to a chrono duration; ValueError unless finite and < 1e9 s, whole
// for a duration counted in seconds, and not a non-zero value that rounds to 0
// ("off" for some fields: 0.5 s of keepalive, 1e-7 s of spin).
template <typename D>
D Seconds(py::handle v) {
  double s = py::cast<double>(v);
  if (!std::isfinite(s) || std::fabs(s) >= 1e9)
    throw py::value_error("durations must be finite numbers of seconds, below 1e9");
  if constexpr (std::ratio_greater_equal_v<typename D::period, std::ratio<1>>) {
    if (s != std::trunc(s)) throw py::value_error("must be a whole number of seconds");
  }
  const D d = std::chrono::round<D>(std::chrono::duration<double>(s));  // 20e-6: 20 us, not 19
  if (d.count() == 0 && s != 0)  // 0 means "off" for some fields: never by rounding
    throw py::value_error("must be 0 or at least the field's unit (it would round to 0)");
  return d;
}

template <typename D>
double ToSeconds(D d) {
  return std::chrono::duration<double>(d).count();
}

struct Field {
  std::string_view key;
  const char* type;  // for the TypeError
  void (*set)(AgentOptions&, py::handle);
  py::object (*get)(const AgentOptions&);
};

// A field taken as is (int, bool, str, lists of them).
template <auto M>
Field Plain(std::string_view key, const char* type) {
  using T = std::remove_cvref_t<decltype(std::declval<AgentOptions&>().*M)>;
  return {key, type, [](AgentOptions& o, py::handle v) { o.*M = py::cast<T>(v); },
          [](const AgentOptions& o) { return py::cast(o.*M); }};
}

// A duration, in float seconds.
template <auto M>
Field Secs(std::string_view key) {
  using D = std::remove_cvref_t<decltype(std::declval<AgentOptions&>().*M)>;
  return {key, "float", [](AgentOptions& o, py::handle v) { o.*M = Seconds<D>(v); },
          [](const AgentOptions& o) { return py::cast(ToSeconds(o.*M)); }};
}

// One row per AgentOptions field except name (Agent's first argument).
const Field kFields[] = {
    {"policy", "str",
     [](AgentOptions& o, py::handle v) {
       o.policy = ValueOrRaise(ParsePolicy(py::cast<std::string>(v)));
     },
     [](const AgentOptions& o) { return py::cast(PolicyName(o.policy)); }},
    Plain<&AgentOptions::transports>("transports", "list of str"),
    Plain<&AgentOptions::tcp_listen_host>("tcp_listen_host", "str"),
    Plain<&AgentOptions::tcp_listen_port>("tcp_listen_port", "int"),
    Plain<&AgentOptions::tcp_advertise_host>("tcp_advertise_host", "str"),
    Plain<&AgentOptions::metadata_listen>("metadata_listen", "str"),
    Plain<&AgentOptions::lanes_per_peer>("lanes_per_peer", "int"),
    Plain<&AgentOptions::chunk_bytes>("chunk_bytes", "int"),
    Plain<&AgentOptions::max_segments_per_chunk>("max_segments_per_chunk", "int"),
    Plain<&AgentOptions::merge_adjacent>("merge_adjacent", "bool"),
    Plain<&AgentOptions::stripe_min_bytes>("stripe_min_bytes", "int"),
    Plain<&AgentOptions::lane_ring_slots>("lane_ring_slots", "int"),
    Plain<&AgentOptions::max_requests>("max_requests", "int"),
    Plain<&AgentOptions::piece_bytes>("piece_bytes", "int"),
    Secs<&AgentOptions::post_timeout>("post_timeout_s"),
    Secs<&AgentOptions::connect_timeout>("connect_timeout_s"),
    Secs<&AgentOptions::io_timeout>("io_timeout_s"),
    Secs<&AgentOptions::tcp_keepalive>("tcp_keepalive_s"),
    Secs<&AgentOptions::spin>("spin_s"),
    Plain<&AgentOptions::post_inline_bytes>("post_inline_bytes", "int"),
    Plain<&AgentOptions::worker_cpus>("worker_cpus", "list of int"),
    Plain<&AgentOptions::max_notification_bytes>("max_notification_bytes", "int"),
    Plain<&AgentOptions::max_notification_bytes_per_peer>("max_notification_bytes_per_peer", "int"),
    Plain<&AgentOptions::max_conns_per_peer>("max_conns_per_peer", "int"),
    {"staging_copy", "str",
     [](AgentOptions& o, py::handle v) {
       o.staging_copy = ValueOrRaise(ParseStagingCopy(py::cast<std::string>(v)));
     },
     [](const AgentOptions& o) { return py::cast(StagingCopyName(o.staging_copy)); }},
    Plain<&AgentOptions::cuda_proxy_blocks>("cuda_proxy_blocks", "int"),
    Plain<&AgentOptions::cuda_proxy_max_bytes>("cuda_proxy_max_bytes", "int"),
    Secs<&AgentOptions::cuda_proxy_idle_exit>("cuda_proxy_idle_exit_s"),
    Secs<&AgentOptions::cuda_proxy_renew_every>("cuda_proxy_renew_every_s"),
};

const Field* Find(std::string_view key) {
  for (const Field& f : kFields)
    if (f.key == key) return &f;
  return nullptr;
}

}  // namespace

AgentOptions OptionsFromKwargs(const std::string& name, const py::kwargs& kwargs) {
  AgentOptions o;
  o.name = name;
  for (auto [k, v] : kwargs) {
    const std::string key = py::cast<std::string>(k);
    const Field* f = Find(key);
    if (f == nullptr)
      throw py::type_error("Agent() got an unexpected keyword argument '" + key +
                           "' (accepted: " + OptionNames() + ")");
    try {
      f->set(o, v);
    } catch (const py::value_error& e) {
      throw py::value_error("Agent() keyword '" + key + "': " + e.what());
    } catch (const py::cast_error&) {
      if (std::string_view(f->type) == "int" && PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr()))
        throw py::value_error("Agent() keyword '" + key +
                              "': " + py::cast<std::string>(py::str(v)) +
                              " is out of range for this option");
      throw py::type_error("Agent() keyword '" + key + "' wants " + f->type + ", got " +
                           py::cast<std::string>(py::str(py::type::of(v).attr("__name__"))));
    }
  }
  return o;
}

py::dict OptionsToDict(const AgentOptions& o) {
  py::dict d;
  d["name"] = o.name;
  for (const Field& f : kFields) d[py::str(f.key.data(), f.key.size())] = f.get(o);
  return d;
}

std::string OptionNames() {
  std::string names;
  for (const Field& f : kFields) names += (names.empty() ? "" : ", ") + std::string(f.key);
  return names;
}

}  // namespace kvlane::python
