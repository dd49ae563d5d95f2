#include "reference/state_dict.h"

#include <sstream>

namespace shardcheck {

std::string GroupRecord::Id() const {
  std::ostringstream s;
  s << optimizer << "/wd_mult=" << wd_mult;
  return s.str();
}

}  // namespace shardcheck
