#!/usr/bin/env bash
# The floor of the two-rank bcast and allgather at one size on this machine,
# beside cadre and Open MPI in the same minutes: REPS turns of
#   bench/c2c (core-to-core round trip: the machine's state),
#   bench/copy_floor SIZE (what two processes need at least, no library),
#   cadre-perf bcast and allgather at SIZE (2 ranks bound to a core each),
#   bench/mpi_coll bcast and allgather at SIZE under Open MPI's mpirun,
# and prints every turn and the medians.
#
#   bench/floor.sh [BUILDDIR]        REPS=5 SIZE_MIB=16
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
reps=${REPS:-5}
mib=${SIZE_MIB:-16}
bytes=$((mib << 20))
for t in mpicc mpirun; do
    command -v $t >/dev/null || { echo "floor.sh: needs $t (Debian: openmpi-bin libopenmpi-dev)" >&2; exit 1; }
done
mpicc -O2 -o "$tmp/mpi_coll" "$here/mpi_coll.c"
cc -O2 -o "$tmp/copy_floor" "$here/copy_floor.c"

# The time (us, column 6: cadre-perf's out-of-place time) of the $bytes row of one cadre-perf or
# mpi_coll run.
perf_time() { awk -v b="$bytes" '$1 == b { print $6; exit }'; }

: > "$tmp/all"
for r in $(seq 1 "$reps"); do
    c2c=$("$tmp/c2c" | awk '/c2c_ns/ { print $2 }')
    echo "turn $r: c2c ${c2c} ns"
    "$tmp/copy_floor" "$mib" 30 | awk -v r="$r" '!/^#/ { t = $(NF - 1); $(NF) = ""; $(NF - 1) = "";
        sub(/ +$/, ""); printf "  floor  %-22s %9.1f us\n", $0, t; print "floor|" $0 "|" t >> "'"$tmp/all"'" }'
    for m in bcast allgather; do
        t=$("$cadrerun" -n 2 --bind-to core "$perf" $m -b "$bytes" -e "$bytes" -c 0 | perf_time)
        printf "  cadre  %-22s %9.1f us\n" "$m" "$t"
        echo "cadre|$m|$t" >> "$tmp/all"
        t=$(mpirun -np 2 --bind-to core "$tmp/mpi_coll" $m "$bytes" "$bytes" | perf_time)
        printf "  ompi   %-22s %9.1f us\n" "$m" "$t"
        echo "ompi|$m|$t" >> "$tmp/all"
    done
done
echo
echo "medians of $reps turns, ${mib} MiB, 2 ranks (us):"
awk -F'|' '{ v[$1 "|" $2] = v[$1 "|" $2] " " $3 } END { for (k in v) print k "|" v[k] }' "$tmp/all" |
    sort | while IFS='|' read -r who what vals; do
        med=$(echo "$vals" | tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
        printf "  %-6s %-22s %9.1f   (%s)\n" "$who" "$what" "$med" "$(echo $vals)"
    done
