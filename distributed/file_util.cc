#include "distributed/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
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

// Starts the writeback of what was written since the last call, once that
// is at least kWritebackStepBytes (or `final`). Advisory: an error is left
// to the fsync that follows every write.
class WritebackPacer {
 public:
  explicit WritebackPacer(int fd) : fd_(fd) {}
  void Written(uint64_t done, bool final = false) {
    if (done - started_ < kWritebackStepBytes && !(final && done > started_)) return;
    ::sync_file_range(fd_, static_cast<off64_t>(started_), static_cast<off64_t>(done - started_),
                      SYNC_FILE_RANGE_WRITE);
    started_ = done;
  }

 private:
  int fd_;
  uint64_t started_ = 0;
};

// Writes every run to `fd` in order, in blocks of at most kWriteBlockBytes
// shown to `observe` first, calling `midway` once half the total is
// written. Returns false with errno set on a write error.
bool WriteRuns(int fd, const std::vector<ByteRun>& runs, const std::function<void()>& midway,
               const ByteObserver& observe) {
  uint64_t total = 0;
  for (const ByteRun& r : runs) total += r.size;
  const uint64_t half = total / 2;
  uint64_t done = 0;
  bool halfway_called = !midway;
  WritebackPacer pacer(fd);
  for (size_t ri = 0; ri < runs.size(); ++ri) {
    const char* p = static_cast<const char*>(runs[ri].data);
    const size_t size = runs[ri].size;
    for (size_t in_run = 0; in_run < size;) {
      if (!halfway_called && done >= half) {
        halfway_called = true;
        midway();
      }
      size_t block = std::min(size - in_run, kWriteBlockBytes);
      if (!halfway_called) block = static_cast<size_t>(std::min<uint64_t>(block, half - done));
      if (observe) observe(ri, p + in_run, block);
      for (size_t put = 0; put < block;) {
        const ssize_t n = ::write(fd, p + in_run + put, block - put);
        if (n < 0) {
          if (errno == EINTR) continue;
          return false;
        }
        put += static_cast<size_t>(n);
      }
      in_run += block;
      done += block;
      pacer.Written(done);
    }
  }
  pacer.Written(done, true);
  return true;
}

}  // namespace

void WriteFileAtomic(const std::string& path, const std::vector<ByteRun>& runs,
                     const std::function<void()>& midway, const ByteObserver& observe) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot create " + tmp + ": " + Errno(), ErrorKind::kEnvironment);
  if (!WriteRuns(fd, runs, midway, observe)) {
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

ReadOnlyFile::ReadOnlyFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot open " + path + ": " + Errno());
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

bool ReadOnlyFile::ReadAt(uint64_t offset, size_t size, void* dst,
                          const ByteObserver& observe) const {
  if (size > kWriteBlockBytes)
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(size),
                    POSIX_FADV_WILLNEED);
  char* out = static_cast<char*>(dst);
  for (size_t done = 0; done < size;) {
    const size_t block = std::min(size - done, kWriteBlockBytes);
    for (size_t got = 0; got < block;) {
      const ssize_t n = ::pread(fd_, out + done + got, block - got,
                                static_cast<off_t>(offset + done + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error("cannot read " + path_ + ": " + Errno());
      if (n == 0) return false;
      got += static_cast<size_t>(n);
    }
    if (observe) observe(0, out + done, block);
    done += block;
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  const ReadOnlyFile file(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("cannot stat " + path + ": " + Errno());
  // One read of the size the file has (a stream's buffered copy costs
  // seconds on a metadata.json of hundreds of MB).
  std::string out(static_cast<size_t>(st.st_size), '\0');
  if (!file.ReadAt(0, out.size(), out.data())) throw Error("cannot read " + path + ": it shrank");
  return out;
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
