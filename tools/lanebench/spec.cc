#include "spec.h"

#include <filesystem>
#include <fstream>

#include "common/json_text.h"
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
  // Written by another process: bounded before it is read (a result of 10^5
  // iterations is a few MiB), and nested no deeper than the files lanebench
  // writes (nlohmann's copy and dump of a value recurse).
  constexpr uintmax_t kMaxBytes = 256u << 20;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return kvlane::Status::NotFound("cannot open " + path);
  if (size > kMaxBytes) return kvlane::Status::InvalidArgument(path + " is larger than 256 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) return kvlane::Status::NotFound("cannot open " + path);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  if (kvlane_tools::JsonDepth(text) > kvlane_tools::kMaxJsonDepth)
    return kvlane::Status::InvalidArgument(path + " is nested too deeply");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
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
