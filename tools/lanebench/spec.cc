#include "spec.h"

#include <fstream>

#include "control.h"

namespace lanebench {

std::string SpecPath(const std::string& dir) { return dir + "/spec.json"; }
std::string ResultPath(const std::string& dir) { return dir + "/result.json"; }

kvlane::Status WriteJsonFile(const std::string& path, const nlohmann::json& j) {
  return WriteFileAtomic(path, j.dump(1));
}

kvlane::Status WriteJsonFile(const std::string& path, const nlohmann::ordered_json& j) {
  return WriteFileAtomic(path, j.dump(1));
}

kvlane::Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return kvlane::Status::NotFound("cannot open " + path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return kvlane::Status::InvalidArgument("malformed JSON in " + path);
  return j;
}

kvlane::Result<RunSpec> ReadSpec(const std::string& dir) {
  KVLANE_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(SpecPath(dir)));
  try {
    return j.get<RunSpec>();
  } catch (const nlohmann::json::exception& e) {
    return kvlane::Status::InvalidArgument(std::string("bad run spec: ") + e.what());
  }
}

}  // namespace lanebench
