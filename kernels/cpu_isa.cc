#include "kernels/cpu_isa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "spec/error.h"

namespace shardcheck {
namespace {

constexpr const char* kEnvVar = "SHARDCHECK_CPU_ISA";

bool CpuRuns(CpuIsa isa) {
#if SHARDCHECK_CPU_ISA_DISPATCH
  __builtin_cpu_init();  // may run before the runtime's own initialisation
  switch (isa) {
    case CpuIsa::kBaseline:
      return true;
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2");
    case CpuIsa::kAvx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return isa == CpuIsa::kBaseline;
#endif
}

CpuIsa ParseCpuIsa(const std::string& name) {
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (CpuIsaName(isa) == name) return isa;
  throw Error(std::string(kEnvVar) + "=" + name + ": not one of baseline, avx2, avx512");
}

CpuIsa ChooseAtStart() {
  const std::vector<CpuIsa> supported = SupportedCpuIsas();
  const char* env = std::getenv(kEnvVar);
  if (env == nullptr || *env == '\0') return supported.back();
  const CpuIsa wanted = ParseCpuIsa(env);
  if (std::find(supported.begin(), supported.end(), wanted) == supported.end())
    throw Error(std::string(kEnvVar) + "=" + env +
                ": this CPU or build lacks it (widest: " + CpuIsaName(supported.back()) + ")");
  return wanted;
}

std::atomic<int> g_active{-1};
std::mutex g_choose;

}  // namespace

std::string CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

std::vector<CpuIsa> SupportedCpuIsas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (CpuRuns(isa)) out.push_back(isa);
  return out;
}

CpuIsa ActiveCpuIsa() {
  const int v = g_active.load(std::memory_order_acquire);
  if (v >= 0) return static_cast<CpuIsa>(v);
  std::lock_guard<std::mutex> lock(g_choose);
  if (g_active.load(std::memory_order_relaxed) < 0)
    g_active.store(static_cast<int>(ChooseAtStart()), std::memory_order_release);
  return static_cast<CpuIsa>(g_active.load(std::memory_order_relaxed));
}

void SetActiveCpuIsa(CpuIsa isa) {
  const std::vector<CpuIsa> supported = SupportedCpuIsas();
  if (std::find(supported.begin(), supported.end(), isa) == supported.end())
    throw Error("CPU ISA " + CpuIsaName(isa) +
                " is not supported here (widest: " + CpuIsaName(supported.back()) + ")");
  std::lock_guard<std::mutex> lock(g_choose);
  g_active.store(static_cast<int>(isa), std::memory_order_release);
}

}  // namespace shardcheck
