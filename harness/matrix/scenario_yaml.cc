#include "harness/matrix/scenario_yaml.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <cctype>
#include <cstdio>

namespace shardcheck {
namespace scenario_detail {

// The first byte of `text` that is not UTF-8, or a control character YAML
// does not allow (other than tab, LF, CR), as "LINE:COLUMN: what"; "" if none.
std::string FirstBadByte(const std::string& text) {
  int line = 1, column = 1;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool ok = len > 0 && i + len <= text.size() && !(len == 2 && c < 0xC2);
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    const std::string where = std::to_string(line) + ":" + std::to_string(column) + ": ";
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", c);
    if (!ok) return where + "byte " + hex + " is not UTF-8 (scenario files are UTF-8 text)";
    if (len == 1 && (c < 0x20 || c == 0x7F) && c != '\t' && c != '\n' && c != '\r')
      return where + "control character " + hex + " (scenario files are text)";
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += len;
  }
  return "";
}

// Where a second YAML document starts (a null mark if there is none). It
// stops there: yaml-cpp 0.7's LoadAll never ends on some malformed inputs
// (",,,…" after a comment yields empty documents forever).
YAML::Mark SecondDocument(const std::string& text) {
  class Counter : public YAML::EventHandler {
   public:
    int documents = 0;
    YAML::Mark second = YAML::Mark::null_mark();
    void OnDocumentStart(const YAML::Mark& m) override {
      if (++documents == 2) second = m;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  } counter;
  std::istringstream in(text);
  YAML::Parser parser(in);
  while (counter.documents < 2 && parser.HandleNextDocument(counter)) {
  }
  return counter.second;
}

// A hint for a syntax error on a line indented with a tab.
std::string TabHint(const std::string& text, int line) {
  std::istringstream in(text);
  std::string l;
  for (int i = 0; i <= line && std::getline(in, l); ++i) {
  }
  const std::string indent = l.substr(0, l.find_first_not_of(" \t"));
  return indent.find('\t') != std::string::npos
             ? " (a tab indents this line; YAML indents with spaces)"
             : "";
}

YAML::Node LoadYaml(const std::string& text, const std::string& path) {
  if (const std::string bad = FirstBadByte(text); !bad.empty())
    throw ScenarioError(path + ":" + bad);
  YAML::Node root;
  YAML::Mark second_document;
  try {
    second_document = SecondDocument(text);
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw ScenarioError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                        std::to_string(e.mark.column + 1) +
                        ": YAML syntax: lists or mappings nested too deep");
  } catch (const YAML::ParserException& e) {
    throw ScenarioError(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                        std::to_string(e.mark.column + 1) + ": YAML syntax: " + e.msg +
                        TabHint(text, e.mark.line));
  } catch (const YAML::Exception& e) {
    throw ScenarioError(path + ":1:1: " + e.what());
  }
  if (!second_document.is_null())
    throw ScenarioError(path + ":" + std::to_string(second_document.line + 1) + ":" +
                        std::to_string(second_document.column + 1) +
                        ": a scenario file holds one YAML document");
  return root;
}

// A quote left open swallows the rest of the file into one value (YAML
// folds its lines), which then fails as a missing key far from the cause:
// refuse a quoted top-level value (but the description) not closed on its
// own line.
void CheckQuotesClosed(const Parser& p, const YAML::Node& root, const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (auto it = root.begin(); it != root.end(); ++it) {
    const YAML::Node v = it->second;  // a copy: `it->` yields a temporary
    if (it->first.Scalar() == "description" || !v.IsScalar() || v.Mark().is_null()) continue;
    const size_t line = static_cast<size_t>(v.Mark().line),
                 col = static_cast<size_t>(v.Mark().column);
    if (line >= lines.size() || col >= lines[line].size()) continue;
    const char quote = lines[line][col];
    if (quote != '"' && quote != '\'') continue;
    bool closed = false;
    for (size_t i = col + 1; i < lines[line].size() && !closed; ++i) {
      if (quote == '"' && lines[line][i] == '\\') {
        ++i;  // an escaped character
      } else if (lines[line][i] == quote) {
        if (quote == '\'' && i + 1 < lines[line].size() && lines[line][i + 1] == '\'') {
          ++i;  // '' is a quote inside single quotes
        } else {
          closed = true;
        }
      }
    }
    if (!closed)
      p.Fail(v, it->first.Scalar() + ": the quoted value is not closed on its line (a closing " +
                    "quote missing?)");
  }
}

// Resolves YAML merge keys ("<<: *base" or "<<: [*a, *b]") in place, as
// YAML 1.1 defines them: keys written beside "<<" win, and among several
// bases the first wins. The merged nodes are the originals, so errors keep
// their line:column. yaml-cpp reads "<<" as an ordinary key.
// `visited` holds the file positions of the collections done: an alias is
// the node it names, so each is walked once (an alias bomb stays cheap).
void ResolveMergeKeys(YAML::Node node, std::set<int>& visited) {
  if (!node.IsMap() && !node.IsSequence()) return;
  if (!visited.insert(node.Mark().pos).second) return;
  if (node.IsSequence()) {
    for (auto child : node) ResolveMergeKeys(child, visited);
    return;
  }
  for (auto it = node.begin(); it != node.end(); ++it) ResolveMergeKeys(it->second, visited);
  const YAML::Node merge = node["<<"];
  if (!merge) return;
  std::vector<YAML::Node> bases;
  if (merge.IsSequence()) {
    for (const auto& b : merge) bases.push_back(b);
  } else {
    bases.push_back(merge);
  }
  const YAML::Node& lookup = node;  // const: a lookup must not add the key
  for (const YAML::Node& base : bases) {
    if (!base.IsMap()) continue;  // CheckKeys then names "<<" as an unknown key
    for (auto it = base.begin(); it != base.end(); ++it)
      if (!lookup[it->first.Scalar()]) node.force_insert(it->first, it->second);
  }
  node.remove("<<");
}


}  // namespace scenario_detail
}  // namespace shardcheck
