#!/usr/bin/env bash
# Small-message rate, the osu_mbw_mr pattern: each sender starts a window of
# 64 isends of one size from distinct buffers into distinct receive buffers
# and waits for one small acknowledgment per window; 1 pair (2 ranks, bound to
# a core each) and 2 pairs (4 ranks on this machine's cores, unbound, Open MPI
# with --oversubscribe), cadre-perf stream beside Open MPI (bench/mpi_pingpong.c,
# the same loop) taking turns, medians of REPS turns. RBUF=one receives each
# window into one buffer instead (osu_bw's loop). BASE=builddir adds another
# build of cadre (before a change) to the turns, in its own column. ITERS=N
# makes every turn N windows per size in both libraries (default: each
# program's own count, about 1000 windows at 8 B: some 10 ms, shorter than
# the scheduler's slices, so that with 2 pairs on 2 cores a turn measures
# where the scheduler put the 4 ranks at its start; 20000 windows make
# about 0.2 s, over which placements change and average out).
# Usage: [REPS=3] [SIZES="8 64 512 4096"] [RBUF=many|one] [BASE=builddir] [ITERS=N] bench/msgrate.sh [builddir]
# Prints a markdown table: messages per second summed over the pairs.
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
mpicc -O2 -o "$tmp/mpi_pingpong" "$here/mpi_pingpong.c"
reps=${REPS:-3}
sizes=${SIZES:-8 64 512 4096}
rbuf=${RBUF:-many}
iters=${ITERS:-}

base=${BASE:+$(cd "$BASE" && pwd)}
cadre_rate() { # ranks size [builddir] -> msg/s
    local bind=core d=${3:-$build}
    [ "$1" -gt 2 ] && bind=none
    timeout 120 "$d/launcher/cadrerun" -n "$1" --bind-to $bind "$d/tools/cadre-perf" stream \
        -b "$2" -e "$2" -c 0 -R "$rbuf" ${iters:+-n "$iters"} | awk '$2 == "msgrate" { print $6 }'
}
mpi_rate() { # ranks size -> msg/s
    local opts=(--bind-to core)
    [ "$1" -gt 2 ] && opts=(--oversubscribe --bind-to none)
    timeout 120 mpirun -np "$1" "${opts[@]}" "$tmp/mpi_pingpong" stream "$2" "$2" "$rbuf" ${iters:+"$iters"} |
        awk '!/^#/ { print $4 }'
}

echo "## message rate on $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'), $(date -u '+%F %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg), receive buffers: $rbuf${iters:+, $iters windows per turn}"
: > "$tmp/c2c.log"
for ((i = 0; i < reps; i++)); do
    "$tmp/c2c" | awk '{ print $2 }' >> "$tmp/c2c.log"
    for np in 2 4; do
        for s in $sizes; do
            echo "$(cadre_rate "$np" "$s")" >> "$tmp/c.$np.$s"
            [ -z "$base" ] || echo "$(cadre_rate "$np" "$s" "$base")" >> "$tmp/b.$np.$s"
            echo "$(mpi_rate "$np" "$s")" >> "$tmp/m.$np.$s"
        done
    done
done
echo
echo "Core-to-core round trip (bench/c2c) before each turn: $(tr '\n' ' ' < "$tmp/c2c.log")ns"
echo
echo "| pairs | size (B) | cadre (M msg/s) | Open MPI (M msg/s) | cadre / Open MPI | cadre turns | Open MPI turns |${base:+ BASE (M msg/s) | BASE turns |}"
echo "|---:|---:|---:|---:|---:|---|---|${base:+---:|---|}"
for np in 2 4; do
    for s in $sizes; do
        c=$(median < "$tmp/c.$np.$s") m=$(median < "$tmp/m.$np.$s")
        ct=$(awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e6 }' "$tmp/c.$np.$s")
        mt=$(awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e6 }' "$tmp/m.$np.$s")
        extra=""
        if [ -n "$base" ]; then
            extra=$(awk -v b="$(median < "$tmp/b.$np.$s")" 'BEGIN { printf " %.2f |", b / 1e6 }')
            extra="$extra $(awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e6 }' "$tmp/b.$np.$s") |"
        fi
        awk -v p=$((np / 2)) -v s="$s" -v c="$c" -v m="$m" -v ct="$ct" -v mt="$mt" -v x="$extra" 'BEGIN {
            printf "| %d | %d | %.2f | %.2f | %.2f | %s | %s |%s\n", p, s, c / 1e6, m / 1e6, (m > 0 ? c / m : 0), ct, mt, x }'
    done
done
