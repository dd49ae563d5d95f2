// A model as scenarios and the command line name it (docs/models.md): an
// oracle model "oracle:<name>" (testing/model_spec.h: gpt-tiny,
// mixed-small, shapes:<list>, sparse-<one of those>) or a tiny real model,
// "gpt-tiny" or "moe-tiny". Parsed in one place, so the prefix is spelled
// once.
#pragma once

#include <string>

#include "testing/model_spec.h"

namespace shardcheck {

class ModelName {
 public:
  enum class Kind { kOracle, kTiny };

  // Throws Error naming `text` and listing the accepted forms for an
  // unknown model or a malformed oracle name.
  static ModelName Parse(const std::string& text);
  // True for "oracle:..." names, without parsing the rest.
  static bool IsOracleText(const std::string& text);

  Kind kind() const { return kind_; }
  bool IsOracle() const { return kind_ == Kind::kOracle; }
  // The name as given ("oracle:shapes:w=8x8", "gpt-tiny").
  const std::string& text() const { return text_; }
  // The oracle model's params (kOracle only; throws Error otherwise).
  const ModelSpec& OracleSpec() const;

 private:
  Kind kind_ = Kind::kTiny;
  std::string text_;
  ModelSpec oracle_;
};

}  // namespace shardcheck
