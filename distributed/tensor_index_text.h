// The `tensors` member of metadata.json written straight from the records,
// as text: the tensor index of a real-scale checkpoint holds hundreds of
// thousands of chunk records, and building them into a JSON tree first
// cost more than linear time (one small allocation per field, then their
// frees; docs/performance.md, "Cost at scale"). The text is byte for byte
// what nlohmann's dump(1) writes for CheckpointMetadata::ToJson's
// `tensors` value, so files do not change.
#pragma once

#include <string>

#include "distributed/checkpoint_format.h"

namespace shardcheck {

// Appends the index as a JSON object at nesting `level` of a dump with
// indent 1: "{", then one member per tensor in key order (each line
// indented level + 1 spaces), then "\n" + level spaces + "}" ("{}" when
// empty). Throws Error on a string that is not valid UTF-8, as dump does.
void AppendTensorIndexText(const TensorTable& tensors, int level,
                           std::string& out);

// An upper bound of the bytes AppendTensorIndexText appends at `level` for
// strings without escapes (a longer text still grows as a string does):
// reserving it keeps a text of tens of megabytes from being copied as it
// doubles.
size_t TensorIndexTextBound(const TensorTable& tensors, int level);

}  // namespace shardcheck
