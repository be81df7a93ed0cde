#!/usr/bin/env bash
# Windowed bandwidth on 2 ranks over shared memory (issue 17's goal: at least
# 1.3x Open MPI from 64 KiB to 64 MiB): `cadre-perf stream` (64 isends, one
# ack per window, osu_bw's loop) beside bench/mpi_pingpong.c's stream, the
# two taking turns, medians over the turns, bench/c2c's state before each.
# RECV=many (the default): the window lands in 64 distinct receive buffers;
# RECV=one: all into one (osu_bw's loop); the senders send from 64 buffers.
# BASE=builddir adds another build's cadre-perf to every turn (a "before"
# column from the same turns).
# Usage: [REPS=3] [MIN=64K] [MAX=64M] [RECV=many|one] [BASE=builddir] bench/window.sh [builddir]
#   (from the source tree after make; run it under the benchmark lock)
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
mpicc -O2 -o "$tmp/mpi_pingpong" "$here/mpi_pingpong.c"
reps=${REPS:-3}
min=${MIN:-64K}
max=${MAX:-64M}
recv=${RECV:-many}
base=${BASE:+$(cd "$BASE" && pwd)}
case $recv in many|one) ;; *) echo "window.sh: RECV is many or one" >&2; exit 2 ;; esac
bytes() { numfmt --from=iec "$1"; }

echo "## windowed stream into $recv receive buffer(s) on $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'), $(date -u '+%F %H:%M') UTC, $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')"
: > "$tmp/c2c.log"
for ((i = 0; i < reps; i++)); do
    "$tmp/c2c" | awk '{ print $2 }' >> "$tmp/c2c.log"
    "$cadrerun" -n 2 --bind-to core "$perf" stream -b "$min" -e "$max" -f 2 -c 0 -R "$recv" |
        awk '!/^#/ { print $1, $6 }' >> "$tmp/cadre"
    mpirun -np 2 --bind-to core "$tmp/mpi_pingpong" stream "$(bytes "$min")" "$(bytes "$max")" "$recv" |
        awk '!/^#/ { print $1, $2 }' >> "$tmp/mpi"
    if [ -n "$base" ]; then
        "$base/launcher/cadrerun" -n 2 --bind-to core "$base/tools/cadre-perf" stream -b "$min" -e "$max" -f 2 -c 0 -R "$recv" |
            awk '!/^#/ { print $1, $6 }' >> "$tmp/base"
    fi
done
size_median < "$tmp/cadre" | sort -k1,1 > "$tmp/c"
size_median < "$tmp/mpi" | sort -k1,1 > "$tmp/m"
echo
echo "Core-to-core round trip (bench/c2c) before each turn: $(tr '\n' ' ' < "$tmp/c2c.log")ns; medians of $reps turns"
echo
if [ -z "$base" ]; then
    echo "| size | cadre (GB/s) | Open MPI (GB/s) | cadre / Open MPI |"
    echo "|---:|---:|---:|---:|"
    join "$tmp/c" "$tmp/m" | sort -n |
        awk '{ c = $1 / $2 / 1e3; m = $1 / $3 / 1e3
               printf "| %s | %.2f | %.2f | %.2fx |\n", $1, c, m, c / m }'
else
    size_median < "$tmp/base" | sort -k1,1 > "$tmp/b"
    echo "BASE: $base ($(git -C "$base" rev-parse --short HEAD 2>/dev/null || echo '?'))"
    echo
    echo "| size | BASE (GB/s) | cadre (GB/s) | Open MPI (GB/s) | BASE / Open MPI | cadre / Open MPI |"
    echo "|---:|---:|---:|---:|---:|---:|"
    join "$tmp/c" "$tmp/m" | join - "$tmp/b" | sort -n |
        awk '{ c = $1 / $2 / 1e3; m = $1 / $3 / 1e3; b = $1 / $4 / 1e3
               printf "| %s | %.2f | %.2f | %.2f | %.2fx | %.2fx |\n", $1, b, c, m, b / m, c / m }'
fi
