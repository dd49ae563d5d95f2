#include "testing/model_spec.h"

#include <gtest/gtest.h>

#include <set>

#include "spec/error.h"

namespace shardcheck {
namespace {

TEST(ModelSpec, GptTinyHasUniqueNamesAndRoles) {
  ModelSpec m = GptTinySpec();
  std::set<std::string> names;
  int embeddings = 0, outputs = 0;
  for (const auto& p : m.params) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    embeddings += p.role == ParamRole::kEmbedding;
    outputs += p.role == ParamRole::kOutput;
  }
  EXPECT_EQ(embeddings, 2);
  EXPECT_EQ(outputs, 1);
  EXPECT_EQ(m.params.size(), 2u + 2u * 12u + 2u + 1u);
  EXPECT_EQ(m.params.front().name, "embedding.word_embeddings.weight");
  EXPECT_EQ(m.params.back().name, "output_layer.weight");
  EXPECT_TRUE(m.HasMatrixParams());
}

TEST(ModelSpec, ParseShapesNamesRolesAndDims) {
  ModelSpec m = ParseShapes("64x32,32,emb=16x8:embedding,3x4x5");
  ASSERT_EQ(m.params.size(), 4u);
  EXPECT_EQ(m.params[0].name, "p0");
  EXPECT_EQ(m.params[0].shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(m.params[1].shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(m.params[2].name, "emb");
  EXPECT_EQ(m.params[2].role, ParamRole::kEmbedding);
  EXPECT_EQ(m.params[3].shape.size(), 3u);
  EXPECT_EQ(m.Numel(), 64 * 32 + 32 + 16 * 8 + 60);
}

TEST(ModelSpec, ParseShapesRejectsBadItemsNamingThem) {
  for (const char* bad : {"64x0", "64xx2", "a=", "=3", "4:weird", "4,p1=4,p1=5", ""}) {
    try {
      ParseShapes(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("shapes"), std::string::npos) << e.what();
    }
  }
}

TEST(ModelSpec, UnknownModelIsAnError) { EXPECT_THROW(ModelByName("gpt-huge"), Error); }

TEST(ModelSpec, OracleModelByNameTakesSparseModels) {
  for (const char* name : {"gpt-tiny", "mixed-small", "shapes:a=4x2,b=3"}) {
    const ModelSpec plain = OracleModelByName(name);
    EXPECT_EQ(plain.name, name);
    EXPECT_FALSE(plain.zero_mask) << name;
    const ModelSpec sparse = OracleModelByName(std::string("sparse-") + name);
    EXPECT_EQ(sparse.name, std::string("sparse-") + name);
    EXPECT_TRUE(sparse.zero_mask) << name;
    ASSERT_EQ(sparse.params.size(), plain.params.size()) << name;
    for (size_t i = 0; i < plain.params.size(); ++i) {
      EXPECT_EQ(sparse.params[i].name, plain.params[i].name);
      EXPECT_EQ(sparse.params[i].shape, plain.params[i].shape);
      EXPECT_EQ(sparse.params[i].role, plain.params[i].role);
    }
  }
  EXPECT_FALSE(ModelByName("mixed-small").zero_mask);
  EXPECT_THROW(ModelByName("sparse-mixed-small"), Error);
  for (const char* bad : {"sparse-", "sparse-gpt-huge", "sparse-sparse-mixed-small", "gpt-huge"}) {
    try {
      OracleModelByName(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("unknown oracle model '") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(OracleModelByName("sparse-shapes:4x0"), Error);
}

}  // namespace
}  // namespace shardcheck
