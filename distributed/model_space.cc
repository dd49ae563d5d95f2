#include "distributed/model_space.h"

#include <algorithm>

#include "spec/device.h"

namespace shardcheck {

namespace {

// Packs this rank's pieces of one kind (main: k = -1, else state key k of
// the piece's child) into a flat fp32 tensor of `size` elements.
at::Tensor Pack(const std::vector<OwnedPiece>& pieces, int child, int k, int64_t size) {
  at::Tensor out = at::zeros({size}, at::kFloat);
  int64_t off = 0;
  for (const OwnedPiece& p : pieces) {
    if (p.child != child) continue;
    const at::Tensor& src = k < 0 ? p.main : p.state[static_cast<size_t>(k)];
    out.narrow(0, off, p.param_range.size()).copy_(src);
    off += p.param_range.size();
  }
  return out;
}

}  // namespace

StateDict GatherModelSpace(DistributedOptimizer& opt, int root) {
  Communicator& comm = opt.comm();
  const int dp = comm.size();
  const std::vector<ParamInfo>& params = opt.params();
  const std::vector<ChildOptimizer>& children = opt.children();
  std::vector<std::vector<OwnedPiece>> where(static_cast<size_t>(dp));
  for (int r = 0; r < dp; ++r) where[static_cast<size_t>(r)] = opt.PiecesOf(r);
  const std::vector<OwnedPiece> mine = opt.Owned();

  StateDict sd;
  const bool is_root = comm.rank() == root;
  if (is_root) {
    sd.optimizer = opt.setup().name;
    sd.step = opt.step();
    sd.groups = GroupRecords(children, params);
    for (size_t i = 0; i < params.size(); ++i)
      sd.tensors[ParamKey(params[i].name)] = HostCopy(opt.ModelParam(static_cast<int>(i)));
  }
  // One gather per (child, kind): pieces padded to the largest rank's size.
  for (size_t c = 0; c < children.size(); ++c) {
    const int child = static_cast<int>(c);
    std::vector<int64_t> sizes(static_cast<size_t>(dp), 0);
    for (int r = 0; r < dp; ++r)
      for (const OwnedPiece& p : where[static_cast<size_t>(r)])
        if (p.child == child) sizes[static_cast<size_t>(r)] += p.param_range.size();
    const int64_t size = *std::max_element(sizes.begin(), sizes.end());
    if (size == 0) continue;
    const StateSchema& schema = children[c].schema;
    for (int k = -1; k < static_cast<int>(schema.keys.size()); ++k) {
      std::vector<at::Tensor> all = comm.Gather(Pack(mine, child, k, size), root);
      if (!is_root) continue;
      std::map<int, at::Tensor> full;  // param -> flat fp32
      for (int r = 0; r < dp; ++r) {
        int64_t off = 0;
        for (const OwnedPiece& p : where[static_cast<size_t>(r)]) {
          if (p.child != child) continue;
          at::Tensor& dst = full[p.param];
          if (!dst.defined())
            dst = at::zeros({params[static_cast<size_t>(p.param)].Numel()}, at::kFloat);
          dst.narrow(0, p.param_range.begin, p.param_range.size())
              .copy_(all[static_cast<size_t>(r)].narrow(0, off, p.param_range.size()));
          off += p.param_range.size();
        }
      }
      for (auto& [param, flat] : full) {
        const ParamInfo& info = params[static_cast<size_t>(param)];
        at::Tensor t = flat.view(info.shape);
        if (k < 0) {
          if (opt.model_dtype() != at::kFloat) sd.tensors[MainParamKey(info.name)] = t;
        } else {
          const StateKey& key = schema.keys[static_cast<size_t>(k)];
          sd.tensors[StateTensorKey(key.name, info.name)] = t.to(key.dtype);
        }
      }
    }
  }
  return sd;
}

}  // namespace shardcheck
