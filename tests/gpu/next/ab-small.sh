#!/bin/bash
# With tests/gpu/next/small-latency.patch applied (not in the library yet): A/B of the 8 KiB 4-rank allreduce
# changes, each switched off by a bit of CADRE_X (1 kernel writes done, 2 idle leader and no
# wait on the same stream, 4 no op for a call ended on the host, 8 leader spins 0.2 ms).
# Needs gpu-bundle/base (a bundle of main, cp -a of device-bundle.sh's dist) and gpu-bundle/dist
# (the patched tree); run: bash tests/gpu/next/ab-small.sh, carry both bundles and this file.
cd "$(dirname "$0")/../../.." || exit 1
O=${OUT:-/tmp/out}; mkdir -p "$O"
for B in base dist; do chmod +x gpu-bundle/$B/bin/* gpu-bundle/$B/tests/gpu/* 2>/dev/null; done
one() { # bundle label ranks size env...
  local B=$1 L=$2 n=$3 sz=$4; shift 4
  ( # shellcheck disable=SC1090
    . "gpu-bundle/$B/env.sh"
    timeout 40 env "$@" cadrerun -n $n --ranks-per-gpu $n --timeout 35 cadre-perf allreduce -G -d float32 -b $sz -e $sz -c 0 -T 0.3 -w 50 2>&1 |
      grep -E "^ +[0-9]+ +[0-9]+ +float32|rror|WARN|imeout" | head -4 | sed "s/^/$L n=$n /" )
}
chk() { # ranks max
  ( . gpu-bundle/dist/env.sh; # shellcheck disable=SC1091
    timeout 90 cadrerun -n $1 --ranks-per-gpu $1 --timeout 85 cadre-perf allreduce -G -d float32 -b 8 -e $2 -f 8 -n 3 -w 1 -c 1 2>&1 |
      grep -E "^ +[0-9]|Out of bounds|rror|imeout" | tail -14 | sed "s/^/check n=$1 /" )
}
{
echo "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
for turn in 1 2 3; do
  echo "-- turn $turn (8 KiB, 4 ranks; columns: bytes count type op root oop-us ... inplace-us)"
  one base base 4 8K
  one dist X0 4 8K CADRE_X=0
  one dist all 4 8K
  one dist no1-kdone 4 8K CADRE_X=14
  one dist no2-idle 4 8K CADRE_X=13
  one dist no4-noop 4 8K CADRE_X=11
  one dist no8-spin 4 8K CADRE_X=7
done
echo "-- other shapes"
for n in 2 3 8; do one base base $n 8K; one dist all $n 8K; done
for sz in 8 256K 1M 256M; do one base base 4 $sz; one dist all 4 $sz; done
one dist X0 4 256M CADRE_X=0
echo "-- checked, new bundle"
chk 4 256M
chk 3 64M
chk 8 64M
echo "== end $(date -u)"
} 2>&1 | tee "$O/ab.txt"
