#include "distributed/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "spec/error.h"

namespace shardcheck {

namespace {
std::string Errno() { return std::strerror(errno); }
}  // namespace

void FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw Error("cannot open folder " + dir + ": " + Errno(), ErrorKind::kEnvironment);
  if (::fsync(fd) != 0) {
    const std::string e = Errno();
    ::close(fd);
    throw Error("cannot fsync folder " + dir + ": " + e, ErrorKind::kEnvironment);
  }
  ::close(fd);
}

namespace {

// Writes every run to `fd` in order, calling `midway` once half the total
// is written. Returns false with errno set on a write error.
bool WriteRuns(int fd, const std::vector<ByteRun>& runs, const std::function<void()>& midway) {
  uint64_t total = 0;
  for (const ByteRun& r : runs) total += r.size;
  const uint64_t half = total / 2;
  constexpr size_t kMaxWrite = size_t{1} << 30;  // write() moves at most ~2 GiB a call
  uint64_t done = 0;
  bool halfway_called = !midway;
  for (const ByteRun& r : runs) {
    const char* p = static_cast<const char*>(r.data);
    size_t in_run = 0;
    while (in_run < r.size) {
      if (!halfway_called && done >= half) {
        halfway_called = true;
        midway();
      }
      size_t want = std::min(r.size - in_run, kMaxWrite);
      if (!halfway_called) want = static_cast<size_t>(std::min<uint64_t>(want, half - done));
      const ssize_t n = ::write(fd, p + in_run, want);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      in_run += static_cast<size_t>(n);
      done += static_cast<uint64_t>(n);
    }
  }
  return true;
}

}  // namespace

void WriteFileAtomic(const std::string& path, const std::vector<ByteRun>& runs,
                     const std::function<void()>& midway) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot create " + tmp + ": " + Errno(), ErrorKind::kEnvironment);
  if (!WriteRuns(fd, runs, midway)) {
    const std::string e = Errno();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("cannot write " + tmp + ": " + e, ErrorKind::kEnvironment);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string e = Errno();
    ::unlink(tmp.c_str());
    throw Error("cannot flush " + tmp + ": " + e, ErrorKind::kEnvironment);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = Errno();
    ::unlink(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path + ": " + e, ErrorKind::kEnvironment);
  }
  FsyncDir(dir.string());
}

void WriteFileAtomic(const std::string& path, const std::string& bytes,
                     const std::function<void()>& midway) {
  WriteFileAtomic(path, std::vector<ByteRun>{{bytes.data(), bytes.size()}}, midway);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path + ": " + Errno());
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + path);
  return s.str();
}

std::string ReadFilePrefix(const std::string& path, uint64_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path + ": " + Errno());
  std::string out(bytes, '\0');
  in.read(out.data(), static_cast<std::streamsize>(bytes));
  if (static_cast<uint64_t>(in.gcount()) != bytes)
    throw Error(path + ": truncated (fewer than " + std::to_string(bytes) + " bytes)");
  return out;
}

}  // namespace shardcheck
