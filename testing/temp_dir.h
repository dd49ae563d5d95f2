// A fresh, empty folder under the system's temporary folder for one test,
// removed with everything in it when the object goes. Names are unique per
// process and object: "<tmp>/shardcheck_<tag>_<pid>_<n>".
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

namespace shardcheck {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> next{0};
    path_ = std::filesystem::temp_directory_path() /
            ("shardcheck_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(next++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // A path inside the folder (not created).
  std::string Sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace shardcheck
