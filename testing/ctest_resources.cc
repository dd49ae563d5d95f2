#include "testing/ctest_resources.h"

#include <cstdlib>

#include "spec/error.h"

namespace shardcheck {
namespace {

std::string Env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? v : "";
}

}  // namespace

std::vector<std::string> CtestGpuIds() {
  const std::string count_text = Env("CTEST_RESOURCE_GROUP_COUNT");
  if (count_text.empty()) return {};
  char* end = nullptr;
  const long count = std::strtol(count_text.c_str(), &end, 10);
  if (*end != '\0' || count < 0)
    throw Error("CTEST_RESOURCE_GROUP_COUNT='" + count_text + "' is not a count");
  std::vector<std::string> ids;
  for (long i = 0; i < count; ++i) {
    const std::string var = "CTEST_RESOURCE_GROUP_" + std::to_string(i) + "_GPUS";
    const std::string value = Env(var);
    if (value.empty()) continue;  // a group of other resources
    // "id:3,slots:1", several allocations separated by ';': take each id.
    size_t at = 0;
    while ((at = value.find("id:", at)) != std::string::npos) {
      const size_t stop = value.find_first_of(",;", at);
      const std::string id = value.substr(at + 3, stop == std::string::npos ? stop : stop - at - 3);
      if (id.empty()) throw Error(var + "='" + value + "' has an empty id");
      ids.push_back(id);
      at += 3;
    }
    if (ids.empty()) throw Error(var + "='" + value + "' names no id");
  }
  return ids;
}

void UseCtestGpus() {
  const std::vector<std::string> ids = CtestGpuIds();
  if (ids.empty()) return;
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
  setenv("CUDA_VISIBLE_DEVICES", list.c_str(), 1);
}

}  // namespace shardcheck
