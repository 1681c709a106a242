// Hex: an address or key as "0x..." for error messages.
#pragma once

#include <cstdint>
#include <string>

namespace kvlane::core {

std::string Hex(uint64_t v);

}  // namespace kvlane::core
