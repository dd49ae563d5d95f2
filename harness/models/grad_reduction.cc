#include "harness/models/grad_reduction.h"

#include <cmath>

#include "spec/error.h"

namespace shardcheck {

std::string GradReductionName(GradReduction r) {
  return r == GradReduction::kExact ? "exact" : "fp32";
}

GradReduction ParseGradReduction(const std::string& name) {
  if (name == "fp32") return GradReduction::kFp32;
  if (name == "exact") return GradReduction::kExact;
  throw Error("grad_reduction: unknown '" + name + "' (fp32 or exact)");
}

int GridExponent(double amax, int micro_batches) {
  if (!(amax > 0.0)) return 0;
  int e = 0;
  std::frexp(amax, &e);  // amax = f * 2^e, f in [0.5, 1): amax < 2^e
  const int headroom = static_cast<int>(std::ceil(std::log2(static_cast<double>(micro_batches))));
  return e - (kGridBits - headroom);
}

namespace {

// Per param, the max |g| over this rank's micro-batch gradients, fp64.
at::Tensor LocalMaxAbs(const std::vector<std::vector<at::Tensor>>& per_mb, size_t params) {
  at::Tensor amax = at::zeros({static_cast<int64_t>(params)}, at::kDouble);
  double* a = amax.data_ptr<double>();
  for (const auto& grads : per_mb)
    for (size_t i = 0; i < params; ++i) a[i] = std::max(a[i], grads[i].abs().max().item<double>());
  return amax;
}

}  // namespace

ExactGrads ExactReduceGrads(const GradSource& source, const std::vector<at::Tensor>& params,
                            int64_t step, int mb_begin, int mb_end, int micro_batches,
                            const GridAllReduce& all_reduce) {
  ExactGrads out;
  std::vector<std::vector<at::Tensor>> per_mb;
  out.loss = source.MicroBatchGrads(params, step, mb_begin, mb_end, micro_batches, per_mb);
  const size_t n = source.spec().params.size();
  at::Tensor amax = LocalMaxAbs(per_mb, n);
  all_reduce(amax, /*max=*/true);
  std::vector<int> exponent(n);
  std::vector<at::Tensor> units(n);
  for (size_t i = 0; i < n; ++i) {
    exponent[i] = GridExponent(amax[static_cast<int64_t>(i)].item<double>(), micro_batches);
    units[i] = at::zeros(source.spec().params[i].shape, at::kLong);
  }
  for (const auto& grads : per_mb) {
    for (size_t i = 0; i < n; ++i) {
      // g * 2^-e is exact in fp64 (a power of two); rounding to the nearest unit is the one
      // inexact step, the same on every rank and in the reference.
      const at::Tensor g = grads[i].to(at::kDouble);
      const at::Tensor u = at::round(g * std::ldexp(1.0, -exponent[i])).to(at::kLong);
      const at::Tensor nz = g != 0;
      out.nonzero += nz.sum().item<int64_t>();
      out.below_unit += (nz & (u == 0)).sum().item<int64_t>();
      units[i].add_(u);
    }
  }
  // One SUM over ranks of every param's units (int64: exact in any order).
  std::vector<at::Tensor> flat;
  for (const at::Tensor& u : units) flat.push_back(u.reshape({-1}));
  at::Tensor all = at::cat(flat);
  all_reduce(all, /*max=*/false);
  int64_t at_off = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = units[i].numel();
    // |sum| < 2^kGridBits: exact in fp64, times 2^e exact, one rounding to fp32.
    out.grads.push_back((all.narrow(0, at_off, k).to(at::kDouble) * std::ldexp(1.0, exponent[i]))
                            .to(at::kFloat)
                            .view(units[i].sizes()));
    at_off += k;
  }
  return out;
}

}  // namespace shardcheck
