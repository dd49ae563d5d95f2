// Loading a scenario file's YAML (docs/scenarios.md): the checks yaml-cpp
// does not make (bytes that are not UTF-8, a second document, tabs, quotes
// left open) with errors at file:line:column, and YAML 1.1 merge keys.
// Internal to the scenario files.
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "harness/matrix/scenario_parser.h"

namespace shardcheck {
namespace scenario_detail {

// The single YAML document of `text`; throws ScenarioError naming `path`,
// line and column for bad bytes, a syntax error (with a hint for tabs) or a
// second document.
YAML::Node LoadYaml(const std::string& text, const std::string& path);

// Refuses a quoted top-level value (but the description) not closed on its
// own line.
void CheckQuotesClosed(const Parser& p, const YAML::Node& root, const std::string& text);

// Resolves YAML merge keys ("<<: *base" or "<<: [*a, *b]") in place;
// `visited` holds the collections done (start it empty).
void ResolveMergeKeys(YAML::Node node, std::set<int>& visited);

}  // namespace scenario_detail
}  // namespace shardcheck
