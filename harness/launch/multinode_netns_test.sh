#!/bin/sh
# ctest dist.multinode_netns: `shardcheck launch --nnodes` across real
# network hosts. The test makes its own hosts: network namespaces joined by
# veth pairs to a bridge in a hub namespace, each with one 10.213.N.0/24
# address (nothing outside these namespaces is touched; the host's own
# interfaces are never used). One launcher runs inside each node namespace.
#
#  1. bitwise — 3 nodes x 1 rank of `train --compare-reference` (muon_lion,
#     gpt-tiny, bf16, 6 steps) over Gloo between the namespaces; rank 0's
#     final.safetensors equals `shardcheck reference` tensor for tensor.
#  2. dead node — 2 nodes x 2 ranks of a long run; node 1 loses its link
#     (the bridge port goes down) and all its processes are SIGKILLed,
#     so no FIN or RST reaches node 0. Node 0's launcher must then end
#     non-zero (its ranks' collective timeout, 124, not the launcher's own
#     --timeout) within the collective timeout plus a margin, and name the
#     node and rank that failed.
#
# Needs root and `ip` (iproute2). Where namespaces cannot be made (not root,
# or a container that forbids them), it exits 77, which ctest reports as
# skipped with the reason printed here.
# Usage: multinode_netns_test.sh SHARDCHECK WORKDIR
set -u
bin=$1
work=$2
tag="sc$$"
subnet="10.213.$(($$ % 200 + 20))"
hub="${tag}hub"
collective_timeout=15

say() { echo "multinode_netns: $*"; }
fail() { say "FAIL: $*"; exit 1; }

cleanup() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${tag}"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
}
trap cleanup EXIT INT TERM

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1; then
  say "SKIP: needs root and iproute2's ip to make network namespaces"
  exit 77
fi
if ! ip netns add "$hub" 2>/dev/null; then
  say "SKIP: this machine forbids network namespaces (ip netns add failed)"
  exit 77
fi
ip -n "$hub" link add br0 type bridge || fail "cannot make a bridge in $hub"
ip -n "$hub" link set br0 up

# make_node I: namespace ${tag}nI with address $subnet.(I+1) on a veth to the bridge.
make_node() {
  ns="${tag}n$1"
  ip netns add "$ns" || fail "ip netns add $ns"
  ip link add "${tag}v$1" type veth peer name "${tag}h$1" || fail "veth for node $1"
  ip link set "${tag}v$1" netns "$ns"
  ip link set "${tag}h$1" netns "$hub"
  ip -n "$hub" link set "${tag}h$1" master br0 up
  ip -n "$ns" addr add "$subnet.$(($1 + 1))/24" dev "${tag}v$1"
  ip -n "$ns" link set "${tag}v$1" up
  ip -n "$ns" link set lo up
}
for i in 0 1 2; do make_node "$i"; done
master="$subnet.1"

rm -rf "$work"
mkdir -p "$work"
common="--optimizer muon_lion --model gpt-tiny --dtype bf16 --weight-decay 0.01"

# 1. Bitwise across 3 nodes.
say "3 nodes x 1 rank over $subnet.0/24"
for i in 0 1 2; do
  ip netns exec "${tag}n$i" "$bin" launch --nnodes 3 --node-rank "$i" --nproc-per-node 1 \
    --master-addr "$master" --master-port 29611 --timeout 240 -- \
    "$bin" train $common --steps 6 --compare-reference --timeout $collective_timeout \
    --out "$work/node$i" >"$work/node$i.log" 2>&1 &
  eval "pid$i=\$!"
done
rc=0
for i in 0 1 2; do
  eval "wait \$pid$i" || rc=$?
done
cat "$work/node0.log" "$work/node1.log" "$work/node2.log"
[ "$rc" -eq 0 ] || fail "a node's launcher exited $rc"
grep -q "^\[node 0 rank 0\] PASS" "$work/node0.log" || fail "node 0 rank 0 printed no PASS line"
"$bin" reference $common --steps 6 --out "$work/ref" >/dev/null || fail "reference run"
"$bin" ckpt-diff "$work/node0/final.safetensors" "$work/ref/final.safetensors" ||
  fail "the 3-node final state differs from the reference"

# 2. A node dies mid-run without a word on the wire.
say "2 nodes x 2 ranks; node 1 is cut off and killed mid-run"
for i in 0 1; do
  ip netns exec "${tag}n$i" "$bin" launch --nnodes 2 --node-rank "$i" --nproc-per-node 2 \
    --master-addr "$master" --master-port 29612 --timeout 200 -- \
    "$bin" train $common --steps 100000 --timeout $collective_timeout \
    --out "$work/dead$i" >"$work/dead$i.log" 2>&1 &
  eval "dpid$i=\$!"
done
# Wait until training is under way on node 0 (its progress lines), at most 90 s.
n=0
until grep -q "step [0-9]" "$work/dead0.log" 2>/dev/null; do
  n=$((n + 1))
  [ "$n" -le 180 ] || { cat "$work/dead0.log"; fail "node 0 never started stepping"; }
  sleep 0.5
done
ip -n "$hub" link set "${tag}h1" down
for pid in $(ip netns pids "${tag}n1"); do kill -9 "$pid" 2>/dev/null; done
killed_at=$(date +%s)
wait "$dpid0"
rc=$?
ended=$(($(date +%s) - killed_at))
wait "$dpid1" 2>/dev/null
cat "$work/dead0.log" | grep -v "step [0-9]*/" | tail -n 30
[ "$rc" -ne 0 ] || fail "node 0 exited 0 although node 1 died"
# 124 is also a rank's own collective timeout (the contract); the launcher's
# own --timeout says so in a line of its own.
! grep -q "shardcheck launch: timeout after" "$work/dead0.log" || fail "node 0 hit the launcher's own timeout: a rank hung"
limit=$((collective_timeout + 30))
[ "$ended" -le "$limit" ] || fail "node 0 took $ended s to end (collective timeout $collective_timeout s)"
grep -q "shardcheck launch: node 0 rank [01] exited with code" "$work/dead0.log" ||
  fail "node 0's launcher names no failing node and rank"
say "node 0 ended with code $rc $ended s after node 1 died"
echo "2 passed, 0 failed"
