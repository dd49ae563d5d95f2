#include "harness/cell/output_target.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "distributed/file_util.h"
#include "spec/error.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

// A fresh "<path>.tmp-<hex>" name beside `path` (the interrupted-save
// naming `shardcheck gc` knows).
std::string StagingName(const std::string& path) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::ostringstream id;
  id << std::hex
     << ((static_cast<uint64_t>(::getpid()) << 32 ^ static_cast<uint64_t>(now)) &
         0x7FFFFFFFFFFFFFFF);
  return fs::path(path).lexically_normal().string() + ".tmp-" + id.str();
}

bool IsEmptyFolder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_empty(path, ec);
}

}  // namespace

void CheckFolderTarget(const std::string& path, bool force, const std::string& flag) {
  std::error_code ec;
  if (force || !fs::exists(fs::symlink_status(path, ec)) || IsEmptyFolder(path)) return;
  throw Error(flag + " " + path +
              (fs::is_directory(path, ec) ? " is a folder that is not empty"
                                          : " exists and is not a folder") +
              ": shardcheck does not write over output (pass --force to replace it)");
}

void CheckFileTarget(const std::string& path, bool force, const std::string& flag) {
  std::error_code ec;
  if (force || !fs::exists(fs::symlink_status(path, ec))) return;
  if (fs::is_directory(path, ec))
    throw Error(flag + " " + path + " is a folder: it takes the path of a file to write");
  throw Error(flag + " " + path +
              " exists: shardcheck does not write over output (pass --force to replace it)");
}

void PrepareFolderTarget(const std::string& path, bool force) {
  CheckFolderTarget(path, force, "--out");
  std::error_code ec;
  if (force && fs::exists(fs::symlink_status(path, ec))) {
    if (fs::is_directory(path, ec) && !fs::is_symlink(path, ec)) {
      for (const auto& e : fs::directory_iterator(path)) fs::remove_all(e.path());
    } else {
      fs::remove(path);
    }
  }
  fs::create_directories(path);
}

OutputFolder::OutputFolder(std::string path, bool force, std::string flag)
    : path_(std::move(path)), flag_(std::move(flag)), force_(force) {
  CheckFolderTarget(path_, force_, flag_);
  // Probe: the folder can be made here (a read-only or virtual filesystem
  // fails now, not after the run).
  const std::string probe = StagingName(path_);
  const fs::path parent = fs::path(probe).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  fs::create_directory(probe);
  fs::remove(probe);
}

OutputFolder::~OutputFolder() {
  if (committed_ || staging_.empty()) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

const std::string& OutputFolder::Staging() {
  if (staging_.empty()) {
    const std::string name = StagingName(path_);
    const fs::path parent = fs::path(name).parent_path();
    if (!parent.empty()) fs::create_directories(parent);
    fs::create_directory(name);
    staging_ = name;
  }
  return staging_;
}

void OutputFolder::Commit() {
  Staging();
  // What is at PATH now was allowed when the command started: absent, an
  // empty folder, or anything under --force.
  CheckFolderTarget(path_, force_, flag_);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path_, ec))) fs::remove_all(path_);
  fs::rename(staging_, path_);
  const fs::path parent = fs::path(path_).lexically_normal().parent_path();
  FsyncDir(parent.empty() ? "." : parent.string());
  committed_ = true;
}

}  // namespace shardcheck
