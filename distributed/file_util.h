// Durable file writes: write-to-temporary, fsync, rename, fsync the folder.
#pragma once

#include <string>

namespace shardcheck {

// Writes `bytes` to `path` atomically (temporary file beside it, fsync,
// rename, fsync of the folder). Throws Error naming the path; on failure the
// destination is untouched and the temporary is removed.
void WriteFileAtomic(const std::string& path, const std::string& bytes);

// fsync of a folder, so a rename inside it is durable. Throws Error.
void FsyncDir(const std::string& dir);

// The whole content of `path`; throws Error naming the path.
std::string ReadFile(const std::string& path);

}  // namespace shardcheck
