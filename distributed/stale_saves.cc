#include "distributed/stale_saves.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "spec/error.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

bool IsStaleName(const std::string& name) {
  static const std::regex pattern(R"(.+\.tmp-[0-9a-f]+)");
  return std::regex_match(name, pattern);
}

int64_t BytesUnder(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file(ec)) total += static_cast<int64_t>(it->file_size(ec));
  return total;
}

double AgeSeconds(const fs::path& dir) {
  std::error_code ec;
  const auto changed = fs::last_write_time(dir, ec);
  if (ec) return 0.0;
  return std::chrono::duration<double>(fs::file_time_type::clock::now() - changed).count();
}

}  // namespace

std::vector<StaleSave> FindStaleSaves(const std::string& parent) {
  std::vector<StaleSave> out;
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return out;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    if (!entry.is_directory(ec) || !IsStaleName(entry.path().filename().string())) continue;
    out.push_back({entry.path().string(), BytesUnder(entry.path()), AgeSeconds(entry.path())});
  }
  std::sort(out.begin(), out.end(),
            [](const StaleSave& a, const StaleSave& b) { return a.path < b.path; });
  return out;
}

std::vector<StaleSave> RemoveStaleSaves(const std::string& parent, double min_age_s) {
  std::vector<StaleSave> removed;
  for (const StaleSave& s : FindStaleSaves(parent)) {
    if (s.age_s < min_age_s) continue;
    std::error_code ec;
    fs::remove_all(s.path, ec);
    if (ec) throw Error("cannot remove " + s.path + ": " + ec.message(), ErrorKind::kEnvironment);
    removed.push_back(s);
  }
  return removed;
}

}  // namespace shardcheck
