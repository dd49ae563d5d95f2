#include "harness/models/model_name.h"

#include <gtest/gtest.h>

#include "spec/error.h"

namespace shardcheck {
namespace {

TEST(ModelName, OracleNamesCarryTheirParams) {
  const ModelName m = ModelName::Parse("oracle:shapes:w=8x4,b=4");
  EXPECT_TRUE(m.IsOracle());
  EXPECT_EQ(m.kind(), ModelName::Kind::kOracle);
  EXPECT_EQ(m.text(), "oracle:shapes:w=8x4,b=4");
  ASSERT_EQ(m.OracleSpec().params.size(), 2u);
  EXPECT_EQ(m.OracleSpec().name, "shapes:w=8x4,b=4");
  EXPECT_EQ(ModelName::Parse("oracle:gpt-tiny").OracleSpec().name, "gpt-tiny");
  EXPECT_TRUE(ModelName::Parse("oracle:sparse-mixed-small").OracleSpec().zero_mask);
}

TEST(ModelName, TinyModelsAreNotOracles) {
  for (const char* name : {"gpt-tiny", "moe-tiny"}) {
    const ModelName m = ModelName::Parse(name);
    EXPECT_FALSE(m.IsOracle()) << name;
    EXPECT_FALSE(ModelName::IsOracleText(name)) << name;
    EXPECT_THROW(m.OracleSpec(), Error) << name;
  }
}

TEST(ModelName, UnknownNamesListTheForms) {
  for (const char* name : {"gpt", "oracle", "Oracle:gpt-tiny", "gpt-tiny ", ""}) {
    try {
      ModelName::Parse(name);
      ADD_FAILURE() << "'" << name << "' parsed";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("unknown model '" + std::string(name) + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("oracle:shapes:<list>"), std::string::npos) << msg;
      EXPECT_NE(msg.find("moe-tiny"), std::string::npos) << msg;
    }
  }
  // The oracle's own error for a malformed oracle name.
  EXPECT_TRUE(ModelName::IsOracleText("oracle:no-such-model"));
  EXPECT_THROW(ModelName::Parse("oracle:no-such-model"), Error);
}

}  // namespace
}  // namespace shardcheck
