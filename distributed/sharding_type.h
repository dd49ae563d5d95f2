// A checkpoint's sharding type (docs/checkpoint-format.md, "Sharding
// types"): a typed name. The names a run accepts are those of the
// registered formats (distributed/sharding_format.h), one file each under
// distributed/sharding/; the four built in have constants here for the code
// that names them.
#pragma once

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

namespace shardcheck {

class ShardingType {
 public:
  // dp_reshardable, Megatron's default.
  constexpr ShardingType() = default;
  // The type of that name, as its format's file defines it. Input from a
  // user goes through ParseShardingType, which checks the name is registered.
  constexpr explicit ShardingType(const char* name) : name_(name) {}

  const char* name() const { return name_; }
  friend bool operator==(ShardingType a, ShardingType b) { return std::strcmp(a.name_, b.name_) == 0; }
  friend bool operator!=(ShardingType a, ShardingType b) { return !(a == b); }
  friend bool operator<(ShardingType a, ShardingType b) { return std::strcmp(a.name_, b.name_) < 0; }
  friend std::ostream& operator<<(std::ostream& os, ShardingType t) { return os << t.name_; }

  static const ShardingType kDpReshardable;
  static const ShardingType kFullyReshardable;
  static const ShardingType kDpZeroGatherScatter;
  static const ShardingType kFullyShardedModelSpace;

 private:
  const char* name_ = "dp_reshardable";
};

inline constexpr ShardingType ShardingType::kDpReshardable{"dp_reshardable"};
inline constexpr ShardingType ShardingType::kFullyReshardable{"fully_reshardable"};
inline constexpr ShardingType ShardingType::kDpZeroGatherScatter{"dp_zero_gather_scatter"};
inline constexpr ShardingType ShardingType::kFullyShardedModelSpace{"fully_sharded_model_space"};

std::string ShardingTypeName(ShardingType t);
// The registered type of that name; throws Error listing every name.
ShardingType ParseShardingType(const std::string& name);
// Every registered type, in the order of their files' names.
const std::vector<ShardingType>& AllShardingTypes();

}  // namespace shardcheck
