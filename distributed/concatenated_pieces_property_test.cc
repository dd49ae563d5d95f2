// Property tests (RapidCheck) of ConcatenatedPieces (distributed/sharding_format.h),
// the run the gathered sharding types write their chunks from without
// concatenating the received shards. Over generated piece sizes (empty
// pieces included) and ranges:
//   - a slice's parts, concatenated, equal the same range of the pieces
//     concatenated;
//   - every part is a view into a piece (no copy), and the parts are the
//     nonempty overlaps with the pieces, in order;
//   - a range outside the run is refused.
// A failure prints the shrunk case.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <vector>

#include "distributed/sharding_format.h"
#include "spec/error.h"

namespace shardcheck {
namespace {

// Whether `part` lies inside `piece`'s memory.
bool Inside(const at::Tensor& part, const at::Tensor& piece) {
  const auto* p = static_cast<const char*>(part.data_ptr());
  const auto* q = static_cast<const char*>(piece.data_ptr());
  return p >= q && p + part.nbytes() <= q + piece.nbytes();
}

RC_GTEST_PROP(ConcatenatedPiecesProp, SlicesAreViewsOfTheRunInOrder, ()) {
  const std::vector<int64_t> sizes = *rc::gen::nonEmpty(rc::gen::container<std::vector<int64_t>>(
      rc::gen::oneOf(rc::gen::just<int64_t>(0), rc::gen::inRange<int64_t>(1, 40))));
  std::vector<at::Tensor> pieces;
  int64_t total = 0;
  for (int64_t n : sizes) {
    pieces.push_back(at::arange(total, total + n, at::kFloat));
    total += n;
  }
  const ConcatenatedPieces run(pieces);
  RC_ASSERT(run.Numel() == total);
  const int64_t begin = *rc::gen::inRange<int64_t>(0, total + 1);
  const int64_t numel = *rc::gen::inRange<int64_t>(0, total - begin + 1);
  const std::vector<at::Tensor> parts = run.Slice(begin, numel);
  RC_ASSERT(!parts.empty());
  RC_ASSERT(at::cat(parts).equal(at::arange(begin, begin + numel, at::kFloat)));
  // The parts: the nonempty overlaps of [begin, begin + numel) with each piece.
  size_t expected = 0;
  int64_t at = 0;
  for (int64_t n : sizes) {
    if (std::min(at + n, begin + numel) > std::max(at, begin)) ++expected;
    at += n;
  }
  RC_ASSERT(parts.size() == (numel == 0 ? 1u : expected));
  size_t piece = 0;
  for (const at::Tensor& part : parts) {
    if (part.numel() == 0) continue;  // an empty tensor has no data pointer
    while (piece < pieces.size() && !Inside(part, pieces[piece])) ++piece;
    RC_ASSERT(piece < pieces.size());  // a view of a later piece: in order, no copy
  }
  RC_ASSERT_THROWS_AS(run.Slice(begin, total - begin + 1), Error);
  RC_ASSERT_THROWS_AS(run.Slice(-1, 1), Error);
}

}  // namespace
}  // namespace shardcheck
