#!/bin/sh
# End-to-end checks through real rank processes (`shardcheck launch`):
#  final   — 3 ranks of `train --compare-reference` (muon_lion, gpt-tiny,
#            bf16, 10 steps) write a final.safetensors equal, tensor for
#            tensor, to `shardcheck reference` with the same arguments;
#  reshard — save at dp 3 after step 4, resume at dp 2 for 5 steps, save
#            again; `shardcheck export` of that checkpoint equals the
#            reference run of 9 steps.
# Usage: done_when_test.sh SHARDCHECK final|reshard WORKDIR
set -eu
bin=$1
what=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
common="--optimizer muon_lion --model gpt-tiny --dtype bf16 --weight-decay 0.01"
case "$what" in
  final)
    "$bin" launch --nproc 3 --timeout 300 -- "$bin" train $common --steps 10 --compare-reference --out "$work/dist"
    "$bin" reference $common --steps 10 --out "$work/ref"
    "$bin" ckpt-diff "$work/dist/final.safetensors" "$work/ref/final.safetensors"
    ;;
  reshard)
    "$bin" launch --nproc 3 --timeout 300 -- "$bin" train $common --steps 4 --bucket-size 20000 \
      --save-at 4 --save-dir "$work/ckpt/step4" --sharding-type dp_reshardable --compare-reference --out "$work/a"
    "$bin" launch --nproc 2 --timeout 300 -- "$bin" train $common --steps 9 --bucket-size 20000 \
      --load "$work/ckpt/step4" --save-at 9 --save-dir "$work/ckpt/step9" --sharding-type dp_reshardable \
      --compare-reference --out "$work/b"
    "$bin" export "$work/ckpt/step9" --out "$work/export.safetensors"
    "$bin" reference $common --steps 9 --out "$work/ref"
    "$bin" ckpt-diff "$work/export.safetensors" "$work/ref/final.safetensors"
    ;;
  *)
    echo "unknown check $what" >&2
    exit 2
    ;;
esac
echo "1 passed, 0 failed"
