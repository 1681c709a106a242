#include "core/host_info.h"

#include <fstream>

namespace kvlane::core {

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace kvlane::core
