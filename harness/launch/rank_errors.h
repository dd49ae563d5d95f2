// The error lines of a job's ranks, held back and said once at the end
// (docs/reliability.md, "Nodes and ranks that die"): when every rank fails
// with the same input error (a DP size that does not divide M, say), the
// launcher's output ends with that one line, naming the ranks that said it,
// instead of one copy per rank scattered above its own summary.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace shardcheck {

class RankErrors {
 public:
  // True when `line` (without its rank prefix or newline) is an error line
  // to hold: one that starts with "shardcheck: error: ".
  static bool IsErrorLine(const std::string& line);

  void Add(int rank, const std::string& line);
  bool empty() const { return order_.empty(); }

  // One line per distinct error, in the order first seen, prefixed with the
  // ranks that said it: "[rank 3] ..." or "[ranks 0-4,6] ...".
  std::string Render() const;

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::vector<int>> ranks_;
};

// "0-4,6" for {0, 1, 2, 3, 4, 6} (sorted, duplicates dropped).
std::string RankList(std::vector<int> ranks);

}  // namespace shardcheck
