#include "case_name.h"

#include <fmt/format.h>

namespace kvbench {

std::string DefaultCaseName(const CaseNameParts& p) {
  auto part = [](const std::string& v, const char* default_value) {
    return v.empty() || v == default_value ? std::string() : "-" + v;
  };
  return fmt::format("{}-b{}{}-{}{}{}{}", p.workload, p.block, part(p.dtype, "bf16"), p.path,
                     part(p.staging_copy, "batch"), part(p.policy, "independent"),
                     p.lanes > 0 ? fmt::format("-lanes{}", p.lanes) : std::string());
}

}  // namespace kvbench
