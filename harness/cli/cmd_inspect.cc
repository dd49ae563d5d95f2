// `shardcheck inspect`: what a checkpoint folder holds (docs/checkpoint-format.md),
// as a table for people or one JSON object for tools, after verifying the
// checksum of every chunk.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

#include "distributed/checkpoint_format.h"
#include "distributed/safetensors.h"
#include "distributed/stale_saves.h"
#include "harness/cli/checkpoint_source.h"
#include "harness/cli/cli.h"
#include "spec/error.h"
#include "spec/schema.h"

namespace shardcheck {

namespace fs = std::filesystem;

namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

int64_t Bytes(const TensorRecord& t) {
  return t.Numel() * static_cast<int64_t>(c10::elementSize(t.dtype));
}

int64_t ChunkCount(const CheckpointMetadata& m) {
  int64_t n = 0;
  for (const TensorRecord& t : m.tensors) n += static_cast<int64_t>(t.chunks.size());
  return n;
}

// File name -> size in bytes, for every file the tensors name: from the
// folder, or (on_disk false) as metadata.json records them (format version
// 3 on; -1 where it does not).
std::map<std::string, int64_t> Files(const std::string& dir, const CheckpointMetadata& m,
                                     bool on_disk) {
  // The distinct names first (a checkpoint at thousands of ranks has
  // millions of chunks and thousands of files).
  std::unordered_set<std::string_view> names;
  for (const TensorRecord& t : m.tensors)
    for (const auto& c : t.chunks) names.insert(c.file);
  std::map<std::string, int64_t> files;
  for (const std::string_view name : names) {
    const std::string file(name);
    if (on_disk) {
      files[file] = static_cast<int64_t>(std::filesystem::file_size(std::filesystem::path(dir) / file));
    } else {
      const auto f = m.files.find(file);
      files[file] = f == m.files.end() ? -1 : static_cast<int64_t>(f->second.bytes);
    }
  }
  return files;
}

int64_t ParamNumel(const CheckpointMetadata& m) {
  int64_t n = 0;
  for (const auto& p : m.params) n += p.Numel();
  return n;
}

nlohmann::ordered_json InspectJson(const std::string& dir, const CheckpointMetadata& m,
                                   bool verified, const std::map<std::string, int64_t>& files) {
  nlohmann::ordered_json j;
  j["dir"] = dir;
  j["format"] = kCheckpointFormatName;
  j["format_version"] = m.format_version;
  j["sharding_type"] = ShardingTypeName(m.sharding_type);
  j["step"] = m.step;
  j["dp_size"] = m.dp_size;
  j["optimizer"] = m.optimizer;
  j["optimizer_config"] = m.optimizer_config;
  j["schemas"] = m.schemas;
  j["model_dtype"] = DtypeName(m.model_dtype);
  j["param_count"] = m.params.size();
  j["param_numel"] = ParamNumel(m);
  j["param_groups"] = nlohmann::ordered_json::array();
  for (const auto& g : m.groups)
    j["param_groups"].push_back({{"id", g.Id()},
                                 {"lr", g.lr},
                                 {"weight_decay", g.weight_decay},
                                 {"params", g.params.size()}});
  auto& lay = j["layout"];
  lay["buffers"] = nlohmann::ordered_json::array();
  for (const auto& b : m.buffers) {
    nlohmann::ordered_json jb{{"param_dtype", DtypeName(b.param_dtype)},
                              {"grad_dtype", DtypeName(b.grad_dtype)},
                              {"bucket_size", b.bucket_size},
                              {"buckets", nlohmann::ordered_json::array()}};
    for (const auto& bk : b.buckets)
      jb["buckets"].push_back({{"numel", bk.numel},
                               {"numel_unpadded", bk.numel_unpadded},
                               {"params", bk.params.size()}});
    lay["buffers"].push_back(jb);
  }
  lay["layer_wise_owner"] = m.layer_wise_owner;
  j["files"] = files;
  j["tensors"] = nlohmann::ordered_json::array();
  for (const TensorRecord& t : m.tensors)
    j["tensors"].push_back({{"key", t.key},
                            {"dtype", SafetensorsDtype(t.dtype)},
                            {"shape", t.shape},
                            {"chunks", t.chunks.size()},
                            {"bytes", Bytes(t)}});
  j["checksums"] = {{"verified", verified}, {"chunks", ChunkCount(m)}};
  return j;
}

// A config value; a list of equal entries (Muon's per-step NS coefficients) as "5 x [a,b,c]".
std::string ValueText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && v.size() > 1) {
    bool same = true;
    for (const auto& e : v) same &= e == v[0];
    if (same) return std::to_string(v.size()) + " x " + v[0].dump();
  }
  return v.dump();
}

// "lr 0.02, weight_decay 0, ...": a child's hyperparameters, without kind, role and schema.
std::string ChildText(const nlohmann::ordered_json& child) {
  std::string s;
  for (auto it = child.begin(); it != child.end(); ++it) {
    if (it.key() == "kind" || it.key() == "role" || it.key() == "schema") continue;
    s += (s.empty() ? "" : ", ") + it.key() + " " + ValueText(*it);
  }
  return s;
}

void PrintText(const std::string& dir, const CheckpointMetadata& m, bool verified,
               const std::map<std::string, int64_t>& files) {
  std::printf("checkpoint       %s\n", dir.c_str());
  std::printf("format           %s, version %d\n", kCheckpointFormatName, m.format_version);
  std::printf("sharding type    %s\n", ShardingTypeName(m.sharding_type).c_str());
  std::printf("step             %lld\n", static_cast<long long>(m.step));
  std::printf("dp size at save  %d\n", m.dp_size);
  std::printf("optimizer        %s\n", m.optimizer.c_str());
  if (m.optimizer_config.contains("children")) {
    for (const auto& child : m.optimizer_config["children"]) {
      const std::string kind = child.value("kind", "?");
      std::string schema;
      auto it = m.schemas.find(kind);
      if (it != m.schemas.end())
        for (const auto& k : it->second) schema += (schema.empty() ? "" : ", ") + k;
      const std::string role = "(" + child.value("role", std::string("?")) + ")";
      std::printf("  %-6s %-8s  %s\n", kind.c_str(), role.c_str(), ChildText(child).c_str());
      std::printf("  %-6s %-8s  [%s]\n", "", "schema", schema.c_str());
    }
  }
  for (const auto& g : m.groups)
    std::printf("param group      %s: %zu params, lr %g, weight_decay %g\n", g.Id().c_str(),
                g.params.size(), g.lr, g.weight_decay);
  std::printf("params           %zu (%lld elements), model dtype %s\n", m.params.size(),
              static_cast<long long>(ParamNumel(m)), DtypeName(m.model_dtype).c_str());
  if (!m.layer_wise_owner.empty()) {
    std::map<int, int> per_rank;
    for (const auto& [name, owner] : m.layer_wise_owner) ++per_rank[owner];
    std::string s;
    for (const auto& [rank, n] : per_rank)
      s += (s.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) + ": " +
           std::to_string(n);
    std::printf("layer-wise       %zu params (owners at save: %s)\n", m.layer_wise_owner.size(),
                s.c_str());
  }
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const BufferRecord& b = m.buffers[i];
    std::printf("buffer %zu         param %s, grad %s, bucket size %lld, %zu buckets\n", i,
                DtypeName(b.param_dtype).c_str(), DtypeName(b.grad_dtype).c_str(),
                static_cast<long long>(b.bucket_size), b.buckets.size());
    std::printf("  %6s  %12s  %14s  %6s\n", "bucket", "numel", "numel_unpadded", "params");
    for (size_t k = 0; k < b.buckets.size(); ++k)
      std::printf("  %6zu  %12lld  %14lld  %6zu\n", k, static_cast<long long>(b.buckets[k].numel),
                  static_cast<long long>(b.buckets[k].numel_unpadded), b.buckets[k].params.size());
  }
  for (const auto& [file, size] : files)
    std::printf("file             %s (%lld bytes)\n", file.c_str(), static_cast<long long>(size));
  size_t width = 3;
  int64_t total = 0;
  for (const TensorRecord& t : m.tensors) {
    width = std::max(width, t.key.size());
    total += Bytes(t);
  }
  std::printf("tensors          %zu (%lld bytes)\n", m.tensors.size(),
              static_cast<long long>(total));
  std::printf("  %-*s  %-5s  %-14s  %6s  %10s\n", static_cast<int>(width), "key", "dtype", "shape",
              "chunks", "bytes");
  for (const TensorRecord& t : m.tensors)
    std::printf("  %-*s  %-5s  %-14s  %6zu  %10lld\n", static_cast<int>(width), t.key.c_str(),
                SafetensorsDtype(t.dtype).c_str(), ShapeText(t.shape).c_str(), t.chunks.size(),
                static_cast<long long>(Bytes(t)));
  if (verified)
    std::printf("checksums: %lld chunks verified\n", static_cast<long long>(ChunkCount(m)));
  else
    std::printf("checksums: not verified (--no-verify), %lld chunks\n",
                static_cast<long long>(ChunkCount(m)));
}

// Folders interrupted saves left, with how to remove them.
void PrintStale(const std::vector<StaleSave>& stale) {
  if (stale.empty()) return;
  std::printf(
      "stale saves      %zu folder(s) of interrupted saves (never loaded; `shardcheck gc "
      "%s` removes them):\n",
      stale.size(), fs::path(stale.front().path).parent_path().c_str());
  for (const StaleSave& s : stale)
    std::printf("                 %s  %.1f MB  %.0f s old\n", s.path.c_str(),
                static_cast<double>(s.bytes) / 1e6, s.age_s);
}

// inspect --metadata-only: `path` is a metadata.json or a folder holding one.
int InspectMetadataOnly(const std::string& path, bool json) {
  const fs::path file = fs::is_directory(path) ? fs::path(ResolveCheckpointDir(path)) / kMetadataFile
                                               : fs::path(path);
  const std::string dir = file.parent_path().string();
  const CheckpointMetadata m = ReadMetadataFile(file.string());
  if (json) std::cout << InspectJson(dir, m, false, Files(dir, m, false)).dump(1) << "\n";
  else PrintText(dir, m, false, Files(dir, m, false));
  std::fflush(stdout);
  return 0;
}

}  // namespace

void AddInspectCommand(CLI::App& app, std::function<int()>& action) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "Describe a checkpoint folder (docs/checkpoint-format.md): sharding type, format version, "
      "step, DP size at save, optimizer and each child's config and schema, params, layout "
      "(buckets with numel and numel_unpadded) and every tensor (key, dtype, global shape, "
      "chunks, bytes), after verifying the xxh3 checksum of every chunk. A folder holding a "
      "`latest` file stands for the checkpoint it names. Exit 2 on any error.");
  auto dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto no_verify = std::make_shared<bool>(false);
  cmd->add_option("dir", *dir, "checkpoint folder")->required();
  cmd->add_flag("--json", *json, "print one JSON object instead of the table");
  cmd->add_flag("--no-verify", *no_verify,
                "skip reading the data and checking the chunk checksums");
  auto metadata_only = std::make_shared<bool>(false);
  cmd->add_flag("--metadata-only", *metadata_only,
                "read metadata.json alone (DIR may name the file): no rank file is opened, file "
                "sizes are the recorded ones, nothing is verified");
  cmd->callback([&action, dir, json, no_verify, metadata_only] {
    action = [=]() {
      if (*metadata_only) return InspectMetadataOnly(*dir, *json);
      const std::string resolved = ResolveCheckpointDir(*dir);
      CheckpointReader reader(resolved);
      if (!*no_verify) {
        try {
          reader.VerifyAll();
        } catch (const Error& e) {
          // The reader names the rank file; say which checkpoint it belongs to.
          const std::string what = e.what();
          throw Error(what.find(resolved) == std::string::npos ? resolved + ": " + what : what);
        }
      }
      // Interrupted saves beside this checkpoint (and in DIR when it is a
      // folder of saves).
      std::vector<StaleSave> stale = FindStaleSaves(fs::path(resolved).parent_path().string());
      if (fs::absolute(*dir) != fs::absolute(resolved).parent_path()) {
        for (const StaleSave& s : FindStaleSaves(*dir)) stale.push_back(s);
      }
      if (*json) {
        nlohmann::ordered_json j = InspectJson(resolved, reader.metadata(), !*no_verify,
                                               Files(resolved, reader.metadata(), true));
        j["stale_saves"] = nlohmann::ordered_json::array();
        for (const StaleSave& s : stale)
          j["stale_saves"].push_back({{"path", s.path}, {"bytes", s.bytes}, {"age_s", s.age_s}});
        std::cout << j.dump(1) << "\n";
      } else {
        PrintText(resolved, reader.metadata(), !*no_verify, Files(resolved, reader.metadata(), true));
        PrintStale(stale);
      }
      std::fflush(stdout);
      return 0;
    };
  });
}

}  // namespace shardcheck
