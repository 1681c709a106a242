// Facts about this host used in metadata and provenance.
#pragma once

#include <string>

#include "kvlane/provenance.h"

namespace kvlane::core {

using kvlane::HostName;  // the host's name (provenance.h)
// /proc/sys/kernel/random/boot_id; equal values mean the same running kernel.
std::string BootId();

}  // namespace kvlane::core
