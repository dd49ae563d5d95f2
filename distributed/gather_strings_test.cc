// GatherStrings across ranks as threads: every rank's string reaches the
// root whole and in rank order, whatever its length (empty, a few bytes,
// far past any fixed record size) and whatever the others' lengths; the
// other ranks get nothing.
#include "distributed/gather_strings.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/communicator_local.h"

namespace shardcheck {
namespace {

std::string StringOf(int rank) {
  if (rank == 1) return "";
  // Rank 2's is 5000 bytes: a first-mismatch detail can be that long.
  const size_t n = rank == 2 ? 5000 : 3 + static_cast<size_t>(rank);
  std::string s(n, static_cast<char>('a' + rank));
  s[0] = '\0';  // bytes, not C strings
  return s;
}

TEST(GatherStrings, EveryRankStringReachesTheRootWholeInRankOrder) {
  for (int root : {0, 3}) {
    std::mutex m;
    std::vector<std::vector<std::string>> got(4);
    const auto errors = RunLocalRanksInProcess(4, std::chrono::seconds(30), [&](Communicator& c) {
      std::vector<std::string> out = GatherStrings(c, StringOf(c.rank()), root);
      std::lock_guard<std::mutex> lock(m);
      got[static_cast<size_t>(c.rank())] = std::move(out);
    });
    for (const auto& e : errors) EXPECT_FALSE(e);
    for (int r = 0; r < 4; ++r) {
      if (r != root) {
        EXPECT_TRUE(got[static_cast<size_t>(r)].empty()) << "rank " << r;
        continue;
      }
      ASSERT_EQ(got[static_cast<size_t>(r)].size(), 4u);
      for (int k = 0; k < 4; ++k) EXPECT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(k)], StringOf(k)) << k;
    }
  }
}

}  // namespace
}  // namespace shardcheck
