#!/usr/bin/env bash
# Point-to-point on 2 ranks of this machine, cadre beside Open MPI in the same
# run: ping-pong latency (cadre-perf sendrecv vs bench/mpi_pingpong.c, the same
# loop) and windowed bandwidth (stream, like osu_bw), over shared memory and,
# for cadre, over TCP loopback beside a plain blocking-socket ping-pong
# between the same two ranks (bench/tcp_alternate: short blocks of each,
# alternated, so that this VM's slow-copy episodes fall on both alike).
# Usage: [REPS=3] [LAT_RUNS=30] [ROUNDS=11] bench/p2p.sh [builddir]   (from the source tree after make)
# Prints a markdown table; bench/RESULTS.md keeps the figures.
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
mpicc -O2 -o "$tmp/mpi_pingpong" "$here/mpi_pingpong.c"
make -s -C "$build/tests" bench/tcp_alternate >/dev/null
reps=${REPS:-3}
lat_runs=${LAT_RUNS:-30}

cadre_col() { # mode transport -> size time_us
    env ${2:+CADRE_TRANSPORT=$2} "$cadrerun" -n 2 --bind-to core "$perf" "$1" -b 8 -e 64M -f 2 -c 0 |
        awk '!/^#/ { print $1, $6 }'
}
mpi_col() { # mode -> size time_us
    mpirun -np 2 --bind-to core "$tmp/mpi_pingpong" "$1" 8 67108864 | awk '!/^#/ { print $1, $2 }'
}
echo "## p2p on $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)"
# The runs take turns (cadre, Open MPI, ...), so that a change of the
# machine's state during the script (see bench/c2c.c) falls on both.
: > "$tmp/c2c.log"
for ((i = 0; i < reps; i++)); do
    "$tmp/c2c" | awk '{ print $2 }' >> "$tmp/c2c.log"
    for mode in sendrecv stream; do
        cadre_col "$mode" "" >> "$tmp/rc.$mode"
        mpi_col "$mode" >> "$tmp/rm.$mode"
    done
done
# TCP: cadre and the blocking socket, medians over ROUNDS alternated rounds.
CADRE_TRANSPORT=tcp "$cadrerun" -n 2 --bind-to core "$build/tests/bench/tcp_alternate" \
    -r "${ROUNDS:-11}" -b 8 -m 64M | awk -F'|' '$2 + 0 > 0 { print $2 + 0, $3 + 0, $4 + 0 }' > "$tmp/tcp"
awk '{ print $1, $2 }' "$tmp/tcp" > "$tmp/ct"
awk '{ print $1, $3 }' "$tmp/tcp" > "$tmp/tr"
for mode in sendrecv stream; do
    size_median < "$tmp/rc.$mode" > "$tmp/c.$mode"
    size_median < "$tmp/rm.$mode" > "$tmp/m.$mode"
done
echo
echo "Core-to-core round trip (bench/c2c) before each run: $(tr '\n' ' ' < "$tmp/c2c.log")ns"
printf '\n| size (B) | cadre shm lat (us) | Open MPI lat (us) | cadre shm bw (GB/s) | Open MPI bw (GB/s) | cadre stream (GB/s) | Open MPI stream (GB/s) | cadre tcp lat (us) | socket ping-pong, same job (us) |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for f in "$tmp"/c.* "$tmp"/m.* "$tmp/ct" "$tmp/tr"; do sort -k1,1 "$f" -o "$f"; done
join "$tmp/c.sendrecv" "$tmp/m.sendrecv" | join - "$tmp/c.stream" | join - "$tmp/m.stream" |
    join -a 1 -e - -o auto - "$tmp/ct" | join -a 1 -e - -o auto - "$tmp/tr" | sort -n |
    awk '{
           printf "| %s | %.3f | %.3f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n",
                  $1, $2, $3, $1 / $2 / 1e3, $1 / $3 / 1e3, $1 / $4 / 1e3, $1 / $5 / 1e3, $6, $7 }'

# The 8-byte latency again, in many short runs taking turns: a run's figure
# depends on where the host put the two vCPUs at that moment, so one long
# run says little; the quartiles of many say more.
: > "$tmp/lat"
for ((i = 0; i < lat_runs; i++)); do
    c=$("$cadrerun" -n 2 --bind-to core "$perf" sendrecv -b 8 -e 8 -n 50000 -c 0 | awk '!/^#/ { print $6 }')
    m=$(mpirun -np 2 --bind-to core "$tmp/mpi_pingpong" lat 8 8 | awk '!/^#/ { print $2 }')
    echo "$c $m" >> "$tmp/lat"
done
quart() { # column -> "q1 median q3"
    sort -g -k"$1","$1" "$tmp/lat" | awk -v k="$1" '{ v[NR] = $k }
        END { printf "%s %s %s", v[int(NR / 4) + 1], v[int((NR + 1) / 2)], v[int(3 * NR / 4) + 1] }'
}
wins=$(awk '$1 <= $2 { w++ } END { print w + 0 }' "$tmp/lat")
echo
echo "8-byte one-way latency, $lat_runs alternated runs of each (lower quartile, median, upper quartile, us):"
echo "- cadre:    $(quart 1)"
echo "- Open MPI: $(quart 2)"
echo "- runs where cadre's figure was at most Open MPI's of the same turn: $wins of $lat_runs"
