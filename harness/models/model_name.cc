#include "harness/models/model_name.h"

#include "spec/error.h"

namespace shardcheck {

namespace {

constexpr const char kOraclePrefix[] = "oracle:";

}  // namespace

bool ModelName::IsOracleText(const std::string& text) {
  return text.rfind(kOraclePrefix, 0) == 0;
}

ModelName ModelName::Parse(const std::string& text) {
  ModelName m;
  m.text_ = text;
  if (IsOracleText(text)) {
    m.kind_ = Kind::kOracle;
    m.oracle_ = OracleModelByName(text.substr(sizeof(kOraclePrefix) - 1));
  } else if (text == "gpt-tiny" || text == "moe-tiny") {
    m.kind_ = Kind::kTiny;
  } else {
    throw Error("unknown model '" + text +
                "' (expected oracle:gpt-tiny, oracle:mixed-small, oracle:shapes:<list>, "
                "oracle:sparse-<one of those>, gpt-tiny or moe-tiny)");
  }
  return m;
}

const ModelSpec& ModelName::OracleSpec() const {
  if (kind_ != Kind::kOracle) throw Error("model " + text_ + " is not an oracle model");
  return oracle_;
}

}  // namespace shardcheck
