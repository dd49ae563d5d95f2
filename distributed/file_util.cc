#include "distributed/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "spec/error.h"

namespace shardcheck {

namespace {
std::string Errno() { return std::strerror(errno); }
}  // namespace

void FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw Error("cannot open folder " + dir + ": " + Errno());
  if (::fsync(fd) != 0) {
    const std::string e = Errno();
    ::close(fd);
    throw Error("cannot fsync folder " + dir + ": " + e);
  }
  ::close(fd);
}

void WriteFileAtomic(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot create " + tmp + ": " + Errno());
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string e = Errno();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write " + tmp + ": " + e);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string e = Errno();
    ::unlink(tmp.c_str());
    throw Error("cannot flush " + tmp + ": " + e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = Errno();
    ::unlink(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path + ": " + e);
  }
  FsyncDir(dir.string());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path + ": " + Errno());
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + path);
  return s.str();
}

}  // namespace shardcheck
