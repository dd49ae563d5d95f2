#include "harness/cli/suggest.h"

#include <algorithm>

namespace shardcheck {

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of neighbours, one edit each.
size_t EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

}  // namespace

std::string Nearest(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  std::string best;
  size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string n = Nearest(word, candidates);
  return n.empty() ? "" : " (did you mean " + n + "?)";
}

}  // namespace shardcheck
