// Strings across ranks: one string per rank gathered to a root, whatever
// their lengths (every rank sends the longest length, all-reduced first, so
// the gather's tensors agree in size). Used for the names of the files a
// save wrote and for the first mismatching tensor of a comparison.
#pragma once

#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace shardcheck {

// Collective: every rank calls it. `root` gets every rank's string in rank
// order; the other ranks get an empty vector.
std::vector<std::string> GatherStrings(Communicator& comm, const std::string& s, int root);

}  // namespace shardcheck
