#!/bin/sh
# ctest dist.launch_killed_rank: `shardcheck launch` with rank 1 of 3
# SIGKILLing itself mid-run. Passes only if the launcher exits non-zero but
# not 124 (its own --timeout, i.e. something hung) and names rank 1; ctest's
# TIMEOUT catches a launcher that never returns.
shardcheck="$1"
out=$("$shardcheck" launch --nproc 3 --timeout 60 -- \
  "$shardcheck" comm-selftest --timeout 30 --die-rank 1 --die-after-ms 300 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 0 ]; then
  echo "FAIL: the launcher exited 0 although rank 1 was killed"
  exit 1
fi
if [ "$rc" -eq 124 ]; then
  echo "FAIL: the launcher hit its timeout: a rank hung instead of failing"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -q "shardcheck launch: rank 1 was killed by signal 9"; then
  echo "FAIL: no launcher line names rank 1 and its signal"
  exit 1
fi
echo "PASS: the launcher exited $rc and named rank 1"
