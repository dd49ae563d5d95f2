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

// The same for the concatenation of `runs`, written straight from their
// memory (no copy into one buffer).
void WriteFileAtomic(const std::string& path, const std::vector<ByteRun>& runs,
                     const std::function<void()>& midway = {});

// fsync of a folder, so a rename inside it is durable. Throws Error.
void FsyncDir(const std::string& dir);

// The whole content of `path`; throws Error naming the path.
std::string ReadFile(const std::string& path);

// The first `bytes` bytes of `path`; throws Error naming the path when it
// is shorter.
std::string ReadFilePrefix(const std::string& path, uint64_t bytes);

}  // namespace shardcheck
