// CleanBackendMessage: a backend's message on one line, without the source
// locations Gloo and c10 put before it, every other character kept.
#include "distributed/communicator_error.h"

#include <gtest/gtest.h>

namespace shardcheck {
namespace {

TEST(CleanBackendMessage, LineBreaksBecomeOneSeparator) {
  EXPECT_EQ(CleanBackendMessage("first\nsecond"), "first; second");
  EXPECT_EQ(CleanBackendMessage("first\r\nsecond"), "first; second");
  EXPECT_EQ(CleanBackendMessage("first\n\n\rsecond\n"), "first; second");
  EXPECT_EQ(CleanBackendMessage("ends with a break\r\n"), "ends with a break");
}

TEST(CleanBackendMessage, OtherControlCharactersAreKept) {
  // Only LF and CR break a line: a tab, a form feed or a vertical tab is text.
  EXPECT_EQ(CleanBackendMessage("key\tvalue"), "key\tvalue");
  EXPECT_EQ(CleanBackendMessage("a\vb\fc\x01" "d"), "a\vb\fc\x01" "d");
}

TEST(CleanBackendMessage, SourceLocationsAreDroppedOtherBracketsKept) {
  EXPECT_EQ(CleanBackendMessage("[/src/a.cc:12] [/src/b.cc:3]  refused [rank 1]"),
            "refused [rank 1]");
  EXPECT_EQ(CleanBackendMessage("address [127.0.0.1]:29500"), "address [127.0.0.1]:29500");
}

TEST(CleanBackendMessage, NothingLeftIsAnUnknownError) {
  EXPECT_EQ(CleanBackendMessage(""), "unknown error");
  EXPECT_EQ(CleanBackendMessage("\n\r\n"), "unknown error");
  EXPECT_EQ(CleanBackendMessage("[/src/a.cc:12] "), "unknown error");
}

}  // namespace
}  // namespace shardcheck
