#!/usr/bin/env bash
# The cost of mismatch detection (CADRE_CHECK) at the 8-byte allreduce on
# 2 ranks: RUNS alternated runs of each setting, the median of each.
#
#   bench/check_cost.sh [BUILDDIR]     RUNS=11 ITERS=200000
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/..}" && pwd)
runs=${RUNS:-11}
iters=${ITERS:-200000}
one() { # CADRE_CHECK value -> time of one call (us)
    CADRE_CHECK=$1 "$build/launcher/cadrerun" -n 2 --bind-to core "$build/tools/cadre-perf" \
        allreduce -b 8 -e 8 -n "$iters" -w 1000 -c 0 | awk '!/^#/ && NF >= 6 { print $6 }'
}
: > /tmp/check_cost.$$.1
: > /tmp/check_cost.$$.0
for ((r = 0; r < runs; r++)); do
    one 1 >> /tmp/check_cost.$$.1
    one 0 >> /tmp/check_cost.$$.0
done
med() { sort -g "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
on=$(med /tmp/check_cost.$$.1)
off=$(med /tmp/check_cost.$$.0)
rm -f /tmp/check_cost.$$.1 /tmp/check_cost.$$.0
echo "8-byte allreduce, 2 ranks, median of $runs runs of $iters calls:"
echo "CADRE_CHECK=1 $on us, CADRE_CHECK=0 $off us: cost $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%+.1f%%", (a / b - 1) * 100 }')"
