// Facts about this host used in metadata and provenance.
#pragma once

#include <string>

namespace kvlane::core {

std::string HostName();
// /proc/sys/kernel/random/boot_id; equal values mean the same running kernel.
std::string BootId();

}  // namespace kvlane::core
