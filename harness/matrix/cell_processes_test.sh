#!/bin/sh
# ctest run.cells_as_processes: `shardcheck run` with a cell's ranks as
# processes through the launcher (the path GPU cells take, here on Gloo):
#  1. two cross-DP resume cells (muon_lion dp2 -> dp3 and adamw dp3 -> dp2,
#     one with a real model) run with --processes and pass, with each
#     phase's rank output, result.json and final state in the cell folder,
#     and the same verdicts and per-step figures as with ranks as threads;
#  2. GPU cells that need more GPUs than given are reported skipped with
#     the reason; a run whose every cell was skipped checked nothing and
#     exits 3.
# Usage: cell_processes_test.sh SHARDCHECK SOURCE_DIR WORKDIR
set -eu
bin=$1
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

filter="id=muon_lion.fully_reshardable.dp2-to-dp3@4.bf16.oracle-mixed-small"
cells="$src/scenarios/ci/oracle_reshard.yaml"
"$bin" run "$cells" --filter "$filter" --processes --quiet --out "$work/proc" || fail "--processes run failed"
"$bin" run "$cells" --filter "$filter" --quiet --out "$work/threads" || fail "threads run failed"
cell="$work/proc/muon_lion.fully_reshardable.dp2-to-dp3@4.bf16.oracle-mixed-small"
for f in uninterrupted.log uninterrupted.result.json uninterrupted.final.safetensors \
  resumed.log resumed.result.json resumed.final.safetensors ckpt; do
  [ -e "$cell/$f" ] || fail "no $f in $cell"
done
/usr/bin/python3 - "$work/proc" "$work/threads" <<'PY' || fail "processes and threads disagree"
import json, sys
def cell(d):
    agg = json.load(open(f"{d}/results.json"))
    c = agg["cells"][0]
    return json.load(open(f"{d}/{c['dir']}/result.json"))
p, t = cell(sys.argv[1]), cell(sys.argv[2])
assert p["verdict"] == t["verdict"] == "pass", (p["verdict"], t["verdict"])
assert [c["verdict"] for c in p["checks"]] == [c["verdict"] for c in t["checks"]]
for run in ("uninterrupted", "resumed"):
    assert p["runs"][run]["steps"] == t["runs"][run]["steps"], run
    assert p["runs"][run]["grad_norm"] == t["runs"][run]["grad_norm"], run
    assert p["runs"][run]["diff"] == t["runs"][run]["diff"], run
print("processes and threads agree on", p["id"])
PY

real="$src/scenarios/ci/tiny_models.yaml"
rcell=$("$bin" list "$real" | awk '{print $1}' | grep -- '-to-dp' | head -n 1)
[ -n "$rcell" ] || fail "no cross-DP cell in $real"
"$bin" run "$real" --filter "id=$rcell" --processes --quiet --out "$work/real" || fail "real-model cell $rcell failed as processes"

# Every cell skipped: nothing was checked, so the run is no pass (exit 3).
rc=0
"$bin" run "$src/scenarios/multi_gpu.yaml" --filter "dp=1,resume_dp=8,optimizer=adamw" --gpus 4 \
  --out "$work/gpus" >"$work/gpus.txt" 2>&1 || rc=$?
[ "$rc" = 3 ] || { cat "$work/gpus.txt"; fail "a run whose every cell was skipped exited $rc, expected 3"; }
grep -q "running 8 cells (0 to run, 8 skipped)" "$work/gpus.txt" ||
  { cat "$work/gpus.txt"; fail "the first line does not count the skips"; }
grep -q "0 passed, 0 failed, 0 errored, 8 skipped of 8 cells" "$work/gpus.txt" ||
  { cat "$work/gpus.txt"; fail "expected 8 skipped cells"; }
grep -q "needs 8 GPUs (one per rank), 4 available" "$work/gpus.txt" || fail "no skip reason"
grep -q "nothing was checked" "$work/gpus.txt" || fail "the run does not say that nothing was checked"
echo "3 passed, 0 failed"
