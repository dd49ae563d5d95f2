// How a run reduces its data-parallel gradients (docs/models.md, "Exact
// gradient reduction"):
//
// - kFp32, as Megatron-LM does: each rank sums its micro-batch gradients in
//   fp32 and divides by M, and the ranks' partial sums are added in fp32 by
//   the reduce-scatter. The bits depend on the DP size (the order of the
//   sums), so a real model trained at two DP sizes differs.
// - kExact, order-free: each micro-batch gradient (divided by M) is rounded
//   onto a fixed-point grid of int64 units of a power-of-two scale per
//   param, chosen from the global max-abs (an all-reduce MAX, itself
//   order-free); the units are summed as integers, exactly and in any
//   order, over micro-batches and ranks, and converted back to fp32 once.
//   The global gradient is then the same bits at every DP size, and the
//   reference computes it the same way on one rank.
//
// The oracle's gradients are exact in fp32 already (docs/oracle.md): the
// mode matters for real models.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/models/grad_source.h"

namespace shardcheck {

enum class GradReduction { kFp32, kExact };
std::string GradReductionName(GradReduction r);  // "fp32" | "exact"
// Throws Error naming the accepted values.
GradReduction ParseGradReduction(const std::string& name);

// The grid: a param whose micro-batch gradients reach max-abs A < 2^e has
// units of 2^(e - kGridBits + ceil(log2 M)), so one micro-batch is below
// 2^(kGridBits - ceil(log2 M)) units and the sum of all M stays within
// 2^kGridBits: exact as an int64 and as a double.
inline constexpr int kGridBits = 52;

// The grid exponent of a param: units are 2^GridExponent(amax, m). amax 0
// gives 0 (every unit is then 0).
int GridExponent(double amax, int micro_batches);

// Collective over the DP ranks, in place: MAX of a double tensor, or SUM of
// an int64 tensor. The reference passes one that does nothing.
using GridAllReduce = std::function<void(at::Tensor& t, bool max)>;

struct ExactGrads {
  std::vector<at::Tensor> grads;  // the global gradient, fp32, model shape, every param
  double loss = 0.0;              // this rank's micro-batch loss sum
  // Elements of this rank's micro-batch gradients that are nonzero but
  // round to 0 units (lost below the grid), and all nonzero ones.
  int64_t below_unit = 0;
  int64_t nonzero = 0;
};

// The exact reduction of one step: this rank's micro-batches [mb_begin,
// mb_end) of `source`, reduced with every rank's through `all_reduce`.
// Every rank gets the same global gradient, bit for bit, at any DP size.
ExactGrads ExactReduceGrads(const GradSource& source, const std::vector<at::Tensor>& params,
                            int64_t step, int mb_begin, int mb_end, int micro_batches,
                            const GridAllReduce& all_reduce);

}  // namespace shardcheck
