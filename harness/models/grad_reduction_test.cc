// The exact gradient reduction (harness/models/grad_reduction.h): the same
// global gradient, bit for bit, at every DP size and rank order, elements
// lost below the grid counted, and the grid's arithmetic.
#include "harness/models/grad_reduction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "spec/error.h"

namespace shardcheck {
namespace {

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
}

// A reusable barrier for `n` threads (C++17 has none).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void ArriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t gen = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
  }

 private:
  int n_, waiting_ = 0;
  int64_t generation_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
};

// An all-reduce among `n` threads of this process: every thread contributes,
// then every thread reads the reduction in rank order `order` (so a test can
// reverse the order in which the ranks' values are combined).
class ThreadAllReduce {
 public:
  ThreadAllReduce(int n, std::vector<int> order)
      : n_(n), order_(std::move(order)), arrived_(n), read_(n), parts_(static_cast<size_t>(n)) {}
  void operator()(int rank, at::Tensor& t, bool max) {
    parts_[static_cast<size_t>(rank)] = t.clone();
    arrived_.ArriveAndWait();
    at::Tensor acc = parts_[static_cast<size_t>(order_[0])].clone();
    for (size_t k = 1; k < order_.size(); ++k) {
      const at::Tensor& p = parts_[static_cast<size_t>(order_[k])];
      acc = max ? at::maximum(acc, p) : acc + p;
    }
    t.copy_(acc);
    read_.ArriveAndWait();
  }

 private:
  int n_;
  std::vector<int> order_;
  Barrier arrived_, read_;
  std::vector<at::Tensor> parts_;
};

// The global gradient at `dp` thread-ranks (M micro-batches split evenly),
// rank 0's copy; every rank's copy must be the same bytes.
std::vector<at::Tensor> ReduceAt(const GradSource& source, const std::vector<at::Tensor>& params,
                                 int dp, int m, bool reversed, int64_t* below = nullptr) {
  std::vector<int> order(static_cast<size_t>(dp));
  for (int r = 0; r < dp; ++r) order[static_cast<size_t>(r)] = reversed ? dp - 1 - r : r;
  ThreadAllReduce all_reduce(dp, order);
  std::vector<ExactGrads> out(static_cast<size_t>(dp));
  std::vector<std::thread> ranks;
  for (int r = 0; r < dp; ++r)
    ranks.emplace_back([&, r] {
      out[static_cast<size_t>(r)] =
          ExactReduceGrads(source, params, 3, r * m / dp, (r + 1) * m / dp, m,
                           [&](at::Tensor& t, bool max) { all_reduce(r, t, max); });
    });
  for (auto& t : ranks) t.join();
  for (int r = 1; r < dp; ++r)
    for (size_t i = 0; i < out[0].grads.size(); ++i)
      EXPECT_TRUE(SameBytes(out[static_cast<size_t>(r)].grads[i], out[0].grads[i]))
          << "rank " << r << " param " << i;
  if (below) {
    *below = 0;
    for (const auto& e : out) *below += e.below_unit;
  }
  return out[0].grads;
}

TEST(ExactReduction, RealModelGradientIsBitwiseTheSameAtEveryDpSizeAndOrder) {
  for (const char* model : {"gpt-tiny", "moe-tiny"}) {
    const auto source = MakeGradSource(model, 11);
    const std::vector<at::Tensor> params = source->InitialParams(at::kFloat);
    const int m = 8;
    const std::vector<at::Tensor> one = ReduceAt(*source, params, 1, m, false);
    for (int dp : {2, 4, 8})
      for (bool reversed : {false, true}) {
        const std::vector<at::Tensor> got = ReduceAt(*source, params, dp, m, reversed);
        for (size_t i = 0; i < one.size(); ++i)
          EXPECT_TRUE(SameBytes(got[i], one[i]))
              << model << " dp " << dp << (reversed ? " reversed" : "") << " param " << i;
      }
    // And it is the gradient: within fp32 rounding of the plain fp32 sum.
    std::vector<at::Tensor> plain;
    source->RankGrads(params, 3, 0, m, m, plain);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(at::allclose(one[i], plain[i], 1e-5, 1e-7)) << model << " param " << i;
  }
}

TEST(ExactReduction, TheFp32SumIsNotOrderFreeOnTheSameData) {
  // What the exact reduction is for: fp32 partial sums at dp 1 and dp 4
  // differ in the last bits somewhere on gpt-tiny.
  const auto source = MakeGradSource("gpt-tiny", 11);
  const std::vector<at::Tensor> params = source->InitialParams(at::kFloat);
  const int m = 8;
  std::vector<at::Tensor> whole;
  source->RankGrads(params, 3, 0, m, m, whole);
  bool differs = false;
  std::vector<at::Tensor> sum;
  for (int r = 0; r < 4; ++r) {
    std::vector<at::Tensor> part;
    source->RankGrads(params, 3, r * 2, r * 2 + 2, m, part);
    if (sum.empty())
      sum = part;
    else
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = sum[i] + part[i];
  }
  for (size_t i = 0; i < sum.size(); ++i) differs = differs || !SameBytes(sum[i], whole[i]);
  EXPECT_TRUE(differs);
}

// One param of 4 elements; micro-batch mb's gradient is `values[mb]`.
class FixedSource final : public GradSource {
 public:
  explicit FixedSource(std::vector<std::vector<float>> values) : values_(std::move(values)) {
    spec_.name = "fixed";
    spec_.params = {{"w", {static_cast<int64_t>(values_[0].size())}, ParamRole::kOther}};
  }
  std::string name() const override { return "fixed"; }
  const ModelSpec& spec() const override { return spec_; }
  bool has_loss() const override { return false; }
  std::vector<at::Tensor> InitialParams(c10::ScalarType dtype) const override {
    return {at::zeros({static_cast<int64_t>(values_[0].size())}, dtype)};
  }
  double RankGrads(const std::vector<at::Tensor>&, int64_t, int, int, int,
                   std::vector<at::Tensor>&) const override {
    throw Error("not used");
  }
  double MicroBatchGrads(const std::vector<at::Tensor>&, int64_t, int mb_begin, int mb_end, int,
                         std::vector<std::vector<at::Tensor>>& out) const override {
    out.clear();
    for (int mb = mb_begin; mb < mb_end; ++mb)
      out.push_back({at::tensor(values_[static_cast<size_t>(mb)], at::kFloat)});
    return 0.0;
  }

 private:
  std::vector<std::vector<float>> values_;
  ModelSpec spec_;
};

TEST(ExactReduction, SumsExactlyWhereFp32WouldCancel) {
  // 1 + 2^-30 - 1 in fp32 is 0 or 2^-30 depending on the order; exact: 2^-30
  // as long as 2^-30 is on the grid (A = 1: unit 2^(1 - 52 + 2)).
  const float tiny = std::ldexp(1.0f, -30);
  FixedSource src({{1.0f, 0, 0, 0}, {tiny, 0, 0, 0}, {-1.0f, 0, 0, 0}, {0, 0, 0, 0}});
  const std::vector<at::Tensor> params = src.InitialParams(at::kFloat);
  for (int dp : {1, 2, 4}) {
    const std::vector<at::Tensor> g = ReduceAt(src, params, dp, 4, dp == 2);
    EXPECT_EQ(g[0][0].item<float>(), tiny) << "dp " << dp;
  }
}

TEST(ExactReduction, CountsElementsLostBelowOneUnit) {
  // A = 1, M = 4: unit 2^-49; 2^-60 rounds to 0 units (lost, counted),
  // 2^-40 does not.
  FixedSource src({{1.0f, std::ldexp(1.0f, -60), std::ldexp(1.0f, -40), 0.0f},
                   {0.5f, 0.0f, 0.0f, 0.0f},
                   {0.0f, std::ldexp(1.0f, -60), 0.0f, 0.0f},
                   {0.0f, 0.0f, 0.0f, 0.0f}});
  const std::vector<at::Tensor> params = src.InitialParams(at::kFloat);
  for (int dp : {1, 2, 4}) {
    int64_t below = -1;
    const std::vector<at::Tensor> g = ReduceAt(src, params, dp, 4, false, &below);
    EXPECT_EQ(below, 2) << "dp " << dp;
    EXPECT_EQ(g[0][0].item<float>(), 1.5f);
    EXPECT_EQ(g[0][1].item<float>(), 0.0f);
    EXPECT_EQ(g[0][2].item<float>(), std::ldexp(1.0f, -40));
  }
}

TEST(ExactReduction, GridExponentLeavesRoomForMMicroBatches) {
  EXPECT_EQ(GridExponent(0.0, 4), 0);
  // A in [2^(e-1), 2^e): unit 2^(e - 52 + ceil(log2 M)).
  EXPECT_EQ(GridExponent(1.0, 4), 1 - 52 + 2);
  EXPECT_EQ(GridExponent(0.75, 4), 0 - 52 + 2);
  EXPECT_EQ(GridExponent(1.0, 24), 1 - 52 + 5);
  EXPECT_EQ(GridExponent(1.0, 1), 1 - 52);
  // M micro-batches at the max stay below 2^52 units.
  for (int m : {1, 3, 4, 24, 32}) {
    const double a = 0.999;
    const double units = a / std::ldexp(1.0, GridExponent(a, m));
    EXPECT_LE(units * m, std::ldexp(1.0, 52)) << "M " << m;
  }
}

TEST(ExactReduction, NamesParse) {
  EXPECT_EQ(ParseGradReduction("exact"), GradReduction::kExact);
  EXPECT_EQ(ParseGradReduction("fp32"), GradReduction::kFp32);
  EXPECT_EQ(GradReductionName(GradReduction::kExact), "exact");
  EXPECT_THROW(ParseGradReduction("fp64"), Error);
}

}  // namespace
}  // namespace shardcheck
