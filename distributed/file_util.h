// Durable file writes: write-to-temporary, fsync, rename, fsync the folder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shardcheck {

// Writes `bytes` to `path` atomically (temporary file beside it, fsync,
// rename, fsync of the folder). Throws Error (kEnvironment: a full disk, a
// read-only folder) naming the path; on failure the destination is
// untouched and the temporary is removed. `midway`, when given, is called
// once half the bytes are written (where failpoints interrupt a write).
void WriteFileAtomic(const std::string& path, const std::string& bytes,
                     const std::function<void()>& midway = {});

// Bytes to write, not owned: they must stay alive during the call.
struct ByteRun {
  const void* data = nullptr;
  size_t size = 0;
};

// Called with each block of the bytes just before it is written, in file
// order: `run` indexes the runs, `data`/`size` lie inside that run. Blocks
// are at most kWriteBlockBytes, so a caller that checksums them reads
// them while they are still in the cache the write then copies from.
using ByteObserver = std::function<void(size_t run, const void* data, size_t size)>;
inline constexpr size_t kWriteBlockBytes = size_t{4} << 20;

// The disk starts writing back every kWritebackStepBytes as they are
// written (sync_file_range), not only at the fsync: the writeback overlaps
// the rest of the write, and the final fsync waits for the tail alone.
inline constexpr uint64_t kWritebackStepBytes = uint64_t{32} << 20;

// The same for the concatenation of `runs`, written straight from their
// memory (no copy into one buffer), each block shown to `observe` first.
void WriteFileAtomic(const std::string& path, const std::vector<ByteRun>& runs,
                     const std::function<void()>& midway = {}, const ByteObserver& observe = {});

// A file opened read-only, closed with its owner (movable, not copyable).
class ReadOnlyFile {
 public:
  // Throws Error naming `path` when it cannot be opened.
  explicit ReadOnlyFile(const std::string& path);
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) = delete;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // Reads bytes [offset, offset + size) into `dst`: asks the kernel to read
  // the whole range ahead (POSIX_FADV_WILLNEED), then copies it in blocks
  // of at most kWriteBlockBytes, each shown to `observe` (run 0) right
  // after it lands, while it is in cache. Returns false when the file ends
  // first; throws Error naming the path on a read error.
  bool ReadAt(uint64_t offset, size_t size, void* dst, const ByteObserver& observe = {}) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// fsync of a folder, so a rename inside it is durable. Throws Error.
void FsyncDir(const std::string& dir);

// The whole content of `path`; throws Error naming the path.
std::string ReadFile(const std::string& path);

// The first `bytes` bytes of `path`; throws Error naming the path when it
// is shorter.
std::string ReadFilePrefix(const std::string& path, uint64_t bytes);

}  // namespace shardcheck
