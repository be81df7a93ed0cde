#!/usr/bin/env bash
# Two builds of cadre against each other on this machine, alternated run by
# run (a change's cost: "behaviour and speed stay as they are"):
#   bench/ab.sh BEFORE_BUILD AFTER_BUILD      (each a built tree: launcher/cadrerun, tools/cadre-perf)
#   ROUNDS=3
# sendrecv and bcast on 2 ranks, allreduce on 2 and 4, allgather on 3 (2 ranks
# bound to a core each, more unbound), -c 0; prints per configuration a
# markdown table of the medians (µs) and after/before.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bench/ab.sh BEFORE_BUILD AFTER_BUILD" >&2; exit 2; }
a=$(cd "$1" && pwd) b=$(cd "$2" && pwd)
rounds=${ROUNDS:-3}
tmp=$(mktemp -d /tmp/cadre-ab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cfgs=("sendrecv 2 -b 8 -e 1M" "allreduce 2 -b 8 -e 16M -c 0" "allreduce 4 -b 8 -e 4M -c 0"
      "bcast 2 -b 8 -e 16M -c 0" "allgather 3 -b 8 -e 4M -c 0")
for ((r = 1; r <= rounds; r++)); do
    for i in "${!cfgs[@]}"; do
        # shellcheck disable=SC2086
        set -- ${cfgs[$i]}
        mode=$1 np=$2
        shift 2
        bind=core
        [ "$np" -gt 2 ] && bind=none
        for v in a b; do
            d=$a
            [ $v = b ] && d=$b
            timeout 300 "$d/launcher/cadrerun" -n "$np" --bind-to $bind "$d/tools/cadre-perf" \
                "$mode" "$@" 2>/dev/null | awk '!/^#/ && NF >= 6 { print $1, $6 }' >>"$tmp/$i.$v" || true
        done
    done
done
for i in "${!cfgs[@]}"; do
    echo "## ${cfgs[$i]} (µs, median of $rounds; before | after | after/before)"
    for v in a b; do
        sort -k1,1n -k2,2g "$tmp/$i.$v" | awk '{ n[$1]++; v[$1, n[$1]] = $2; if (!($1 in s)) { s[$1] = 1; o[++k] = $1 } }
            END { for (i = 1; i <= k; i++) { x = o[i]; print x, v[x, int((n[x] + 1) / 2)] } }' |
            sort -k1,1 >"$tmp/$i.$v.med"
    done
    join "$tmp/$i.a.med" "$tmp/$i.b.med" | sort -n | awk '{ printf "| %s | %s | %s | %.2f |\n", $1, $2, $3, $3 / $2 }'
done
