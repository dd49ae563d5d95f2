// "Did you mean ...?" for a mistyped flag or subcommand, as git does: the
// nearest known name by edit distance (a swap of two neighbours counts as
// one edit), when it is near enough to be the one meant.
#pragma once

#include <string>
#include <vector>

namespace shardcheck {

// The candidate nearest to `word` within max(1, |word| / 3) edits, or ""
// (ties: the first in `candidates`).
std::string Nearest(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean X?)" with the nearest candidate, or "".
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace shardcheck
