#!/usr/bin/env bash
# Point-to-point on 2 ranks of this machine, cadre beside Open MPI in the same
# run: ping-pong latency (cadre-perf sendrecv vs bench/mpi_pingpong.c, the same
# loop) and windowed bandwidth (stream, like osu_bw), over shared memory and,
# for cadre, over TCP loopback beside a plain blocking-socket ping-pong.
# Usage: bench/p2p.sh [builddir]   (run from the source tree after make)
# Prints a markdown table; bench/RESULTS.md keeps the figures.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src}
cadrerun="$build/launcher/cadrerun"
perf="$build/tools/cadre-perf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 -o "$tmp/mpi_pingpong" "$src/bench/mpi_pingpong.c"
have_tcp_ref=0
if [[ -f $src/bench/tcp_pingpong.c ]]; then
    cc -O2 -o "$tmp/tcp_pingpong" "$src/bench/tcp_pingpong.c" && have_tcp_ref=1
fi
reps=${REPS:-3}

# median of the values of one column over $reps runs, per size
median_runs() { # cmd... ; prints "size value" lines (median over reps)
    for ((i = 0; i < reps; i++)); do "$@"; done | sort -k1,1n -k2,2g | awk '
        { n[$1]++; v[$1, n[$1]] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
        END { for (i = 1; i <= k; i++) { s = order[i]; print s, v[s, int((n[s] + 1) / 2)] } }'
}
cadre_col() { # mode transport -> size time_us
    env ${2:+CADRE_TRANSPORT=$2} "$cadrerun" -n 2 --bind-to core "$perf" "$1" -b 8 -e 64M -f 2 -c 0 |
        awk '!/^#/ { print $1, $6 }'
}
mpi_col() { # mode -> size time_us
    mpirun -np 2 --bind-to core "$tmp/mpi_pingpong" "$1" 8 67108864 | awk '!/^#/ { print $1, $2 }'
}
echo "## p2p on $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)"
for mode in sendrecv stream; do
    median_runs cadre_col "$mode" "" > "$tmp/c.$mode"
    median_runs mpi_col "$mode" > "$tmp/m.$mode"
done
median_runs cadre_col sendrecv tcp > "$tmp/ct"
if ((have_tcp_ref)); then
    median_runs sh -c "'$tmp/tcp_pingpong' -m 67108864 | awk '!/^#/ && NF >= 4 { print \$1, \$3 }'" > "$tmp/tr"
else
    : > "$tmp/tr"
fi
printf '\n| size (B) | cadre shm lat (us) | Open MPI lat (us) | cadre shm bw (GB/s) | Open MPI bw (GB/s) | cadre stream (GB/s) | Open MPI stream (GB/s) | cadre tcp lat (us) | socket ping-pong (us) |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for f in "$tmp"/c.* "$tmp"/m.* "$tmp/ct" "$tmp/tr"; do sort -k1,1 "$f" -o "$f"; done
join "$tmp/c.sendrecv" "$tmp/m.sendrecv" | join - "$tmp/c.stream" | join - "$tmp/m.stream" |
    join -a 1 -e - -o auto - "$tmp/ct" | join -a 1 -e - -o auto - "$tmp/tr" | sort -n |
    awk '{
           printf "| %s | %.3f | %.3f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n",
                  $1, $2, $3, $1 / $2 / 1e3, $1 / $3 / 1e3, $1 / $4 / 1e3, $1 / $5 / 1e3, $6, $7 }'
