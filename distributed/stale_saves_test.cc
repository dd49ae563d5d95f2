// Stale saves: only "<name>.tmp-<hex>" folders directly in the parent count,
// each with the bytes of every file under it (sub-folders included); gc
// removes only those old enough and leaves everything else alone.
#include "distributed/stale_saves.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/temp_dir.h"

namespace shardcheck {
namespace {

namespace fs = std::filesystem;

void WriteBytes(const fs::path& path, size_t n) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << std::string(n, 'x');
}

// A parent with one stale save of 100 + 20 + 7 bytes (one file a level
// down), one committed checkpoint, and names that only look stale.
void MakeParent(const TempDir& tmp) {
  WriteBytes(tmp.path() / "step_3.tmp-1a2b" / "rank_0.safetensors", 100);
  WriteBytes(tmp.path() / "step_3.tmp-1a2b" / "metadata.json", 20);
  WriteBytes(tmp.path() / "step_3.tmp-1a2b" / "sub" / "more.bin", 7);
  WriteBytes(tmp.path() / "step_2" / "metadata.json", 50);
  WriteBytes(tmp.path() / "step_4.tmp-zz" / "x", 5);  // not hex
  WriteBytes(tmp.path() / "step_5.tmp-", 5);        // no id
  WriteBytes(tmp.path() / "file.tmp-12", 5);        // a file, not a folder
  WriteBytes(tmp.path() / "step_2" / "inner.tmp-ab" / "x", 5);  // not directly in the parent
}

TEST(StaleSaves, FindsTheTempFoldersWithTheBytesOfEveryFileUnderThem) {
  TempDir tmp("stale_find");
  MakeParent(tmp);
  const auto found = FindStaleSaves(tmp.path().string());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, (tmp.path() / "step_3.tmp-1a2b").string());
  EXPECT_EQ(found[0].bytes, 127);
  EXPECT_GE(found[0].age_s, 0.0);
  EXPECT_LT(found[0].age_s, 3600.0);
}

TEST(StaleSaves, SortedByNameAndEmptyForAMissingParent) {
  TempDir tmp("stale_sorted");
  WriteBytes(tmp.path() / "b.tmp-02" / "f", 3);
  WriteBytes(tmp.path() / "a.tmp-01" / "f", 4);
  const auto found = FindStaleSaves(tmp.path().string());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(fs::path(found[0].path).filename(), "a.tmp-01");
  EXPECT_EQ(found[0].bytes, 4);
  EXPECT_EQ(fs::path(found[1].path).filename(), "b.tmp-02");
  EXPECT_EQ(found[1].bytes, 3);
  EXPECT_TRUE(FindStaleSaves(tmp.Sub("no-such-folder")).empty());
}

TEST(StaleSaves, RemovesOnlyStaleSavesOldEnough) {
  TempDir tmp("stale_remove");
  MakeParent(tmp);
  // Younger than an hour: a save that may still be running is kept.
  EXPECT_TRUE(RemoveStaleSaves(tmp.path().string(), 3600.0).empty());
  EXPECT_TRUE(fs::exists(tmp.path() / "step_3.tmp-1a2b"));
  const auto removed = RemoveStaleSaves(tmp.path().string(), 0.0);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].bytes, 127);
  EXPECT_FALSE(fs::exists(tmp.path() / "step_3.tmp-1a2b"));
  for (const char* kept : {"step_2/metadata.json", "step_4.tmp-zz/x", "step_5.tmp-", "file.tmp-12",
                           "step_2/inner.tmp-ab/x"})
    EXPECT_TRUE(fs::exists(tmp.path() / kept)) << kept;
}

}  // namespace
}  // namespace shardcheck
