#!/usr/bin/env bash
# The 8 B message rate (window 64, 1 pair, bound to a core each) block by
# block: ROUNDS rounds of TURNS alternated launches of bench/rate_blocks.c
# against cadre, against a BASE build of cadre if given, and against Open
# MPI, each launch BLOCKS blocks of PER windows (40 of 1000: about 4 ms a
# block, 0.15 s a launch). This machine's speed moves within a second (the
# vCPUs take turns being slow: rates of about 10 and 18 M msg/s, and the
# blocks of a launch switch between them); a round takes a few seconds, so
# its libraries meet the same moves. Prints each round's median block per
# library and their ratio, then every block's median, 25th and 10th
# percentile per library over the whole run.
# Usage: [ROUNDS=10] [TURNS=3] [BLOCKS=40] [PER=1000] [BASE=builddir] bench/rate_blocks.sh [builddir]
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
rounds=${ROUNDS:-10} turns=${TURNS:-3} blocks=${BLOCKS:-40} per=${PER:-1000}
base=${BASE:+$(cd "$BASE" && pwd)}
cc -O2 -I"$top/include" -o "$tmp/rb_cadre" "$here/rate_blocks.c" -L"$build/.libs" -lcadre \
    -Wl,-rpath,"$build/.libs"
[ -z "$base" ] || cc -O2 -I"$base/include" -o "$tmp/rb_base" "$here/rate_blocks.c" \
    -L"$base/.libs" -lcadre -Wl,-rpath,"$base/.libs"
mpicc -O2 -DUSE_MPI -o "$tmp/rb_mpi" "$here/rate_blocks.c"
libs="cadre${base:+ base} mpi"
run() { # lib -> block rates, one per line
    case $1 in
    cadre) timeout 120 "$cadrerun" -n 2 --bind-to core "$tmp/rb_cadre" "$blocks" "$per" ;;
    base) timeout 120 "$base/launcher/cadrerun" -n 2 --bind-to core "$tmp/rb_base" "$blocks" "$per" ;;
    mpi) timeout 120 mpirun -np 2 --bind-to core "$tmp/rb_mpi" "$blocks" "$per" ;;
    esac
}

echo "## 8 B message rate by blocks of $per windows on $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'), $(date -u '+%F %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round (UTC) | c2c (ns) | cadre (M msg/s) |${base:+ BASE (M msg/s) |} Open MPI (M msg/s) | cadre / Open MPI |"
echo "|---|---:|---:|${base:+---:|}---:|---:|"
declare -A med # library -> the round's median block
for ((r = 0; r < rounds; r++)); do
    c2c=$("$tmp/c2c" | awk '{ print $2 }')
    for ((t = 0; t < turns; t++)); do
        for l in $libs; do
            run "$l" >> "$tmp/$l.$r"
        done
    done
    line="| $(date -u +%H:%M:%S) | $c2c |"
    for l in $libs; do
        med[$l]=$(median < "$tmp/$l.$r")
        line="$line ${med[$l]} |"
        cat "$tmp/$l.$r" >> "$tmp/$l.all"
    done
    echo "$line $(awk -v c="${med[cadre]}" -v m="${med[mpi]}" 'BEGIN { printf "%.2f", c / m }') |"
done
echo
echo "| library | blocks | median | 25th percentile | 10th percentile |"
echo "|---|---:|---:|---:|---:|"
for l in $libs; do
    sort -g "$tmp/$l.all" | awk -v l="$l" '{ v[NR] = $1 }
        END { printf "| %s | %d | %.2f | %.2f | %.2f |\n", (l == "base" ? "BASE" : l == "mpi" ? "Open MPI" : l), NR, v[int((NR + 1) / 2)], v[int((NR + 3) / 4)], v[int((NR + 9) / 10)] }'
done
