#include "spec/state_dict.h"

#include <sstream>

#include "spec/error.h"

namespace shardcheck {

std::string GroupRecord::Id() const {
  std::ostringstream s;
  s << optimizer << "/wd_mult=" << wd_mult;
  return s.str();
}

StateDictKey ParseStateDictKey(const std::string& key) {
  StateDictKey k;
  const size_t dot = key.find('.');
  const std::string head = key.substr(0, dot);
  if (dot != std::string::npos && dot + 1 < key.size()) {
    const std::string rest = key.substr(dot + 1);
    if (head == "param" || head == "main_param") {
      k.role = head == "param" ? StateDictKey::Role::kParam : StateDictKey::Role::kMainParam;
      k.param = rest;
      return k;
    }
    const size_t second = rest.find('.');
    if (head == "state" && second != std::string::npos && second > 0 && second + 1 < rest.size()) {
      k.role = StateDictKey::Role::kState;
      k.state_key = rest.substr(0, second);
      k.param = rest.substr(second + 1);
      return k;
    }
  }
  throw Error("'" + key +
              "' is not a state-dict key (param.<name>, main_param.<name> or state.<key>.<name>)");
}

}  // namespace shardcheck
