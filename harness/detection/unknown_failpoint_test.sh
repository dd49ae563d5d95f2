#!/bin/sh
# A misspelt failpoint must never silently disable a bug: `run` with an
# unknown name in SHARDCHECK_FAILPOINTS, `selftest --failpoint` with an
# unknown name or a fault's name, and a silent bug given a fault's action
# are all refused with exit 2 and one line naming the term.
# Usage: unknown_failpoint_test.sh SHARDCHECK OUT_DIR (from the source root)
set -u
bin=$1
out=$2
rm -rf "$out" && mkdir -p "$out"
fails=0
expect() {  # expect NAME EXIT REGEX -- command...
  name=$1 want=$2 regex=$3
  shift 4
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; cat "$out/$name.log"; fails=$((fails + 1)); return
  fi
  if ! grep -Eq "$regex" "$out/$name.log"; then
    echo "FAIL $name: output lacks /$regex/"; cat "$out/$name.log"; fails=$((fails + 1)); return
  fi
  if [ -e "$out/$name/results.json" ]; then
    echo "FAIL $name: a refused run wrote results"; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}
cell="optimizer=adam,dp=1,dtype=fp32,sharding_type=dp_reshardable"
expect run_typo 2 "unknown failpoint 'skip_post_load_param_synk'" -- \
  env SHARDCHECK_FAILPOINTS=skip_post_load_param_synk "$bin" run scenarios/ci/oracle_roundtrip.yaml \
  --filter "$cell" --out "$out/run_typo" --quiet
expect run_typo_in_list 2 "unknown failpoint 'drop_step_on_sav'" -- \
  env SHARDCHECK_FAILPOINTS=skip_post_load_param_sync,drop_step_on_sav "$bin" run \
  scenarios/ci/oracle_roundtrip.yaml --filter "$cell" --out "$out/run_typo_in_list" --quiet
expect silent_with_fault_action 2 "silent bug takes no action but 'on'" -- \
  env SHARDCHECK_FAILPOINTS=drop_step_on_save=crash "$bin" run scenarios/ci/oracle_roundtrip.yaml \
  --filter "$cell" --out "$out/silent_with_fault_action" --quiet
expect selftest_typo 2 "unknown failpoint 'lion_sign_zero_is_on'" -- \
  "$bin" selftest --failpoint lion_sign_zero_is_on --out "$out/selftest_typo" --quiet
expect selftest_fault 2 "is a fault" -- \
  "$bin" selftest --failpoint save.before_rename --out "$out/selftest_fault" --quiet
[ "$fails" -eq 0 ] || { echo "$fails refusal check(s) failed"; exit 1; }
echo "every misspelt or misused failpoint was refused"
