#include "harness/launch/rank_errors.h"

#include <algorithm>

namespace shardcheck {

bool RankErrors::IsErrorLine(const std::string& line) {
  return line.rfind("shardcheck: error: ", 0) == 0;
}

void RankErrors::Add(int rank, const std::string& line) {
  auto it = ranks_.find(line);
  if (it == ranks_.end()) {
    order_.push_back(line);
    it = ranks_.emplace(line, std::vector<int>{}).first;
  }
  it->second.push_back(rank);
}

std::string RankList(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string RankErrors::Render() const {
  std::string text;
  for (const std::string& line : order_) {
    const std::vector<int>& who = ranks_.at(line);
    text += std::string(who.size() == 1 ? "[rank " : "[ranks ") + RankList(who) + "] " + line + "\n";
  }
  return text;
}

}  // namespace shardcheck
