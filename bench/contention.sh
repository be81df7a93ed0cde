#!/usr/bin/env bash
# The 2-rank float32 sum allreduce, 8 B to 64 MiB, on a quiet machine and with
# LOAD `yes >/dev/null` processes beside the job (issue 17's setting: six on
# this 2-core machine, each rank gets about a quarter of a core), cadre beside
# Open MPI (bench/mpi_coll.c) and torch.distributed's gloo backend
# (bench/gloo_coll.py, CPU tensors) in the same minutes: the three take turns,
# REPS turns, the median per size. Each launcher's default binding (cadrerun
# and mpirun: a core per rank; gloo: none). Each size runs for at least
# MINTIME seconds in each library (cadre-perf -T, mpi_coll's and
# gloo_coll.py's MINTIME: runs of growing length until one takes that long),
# so that a loaded figure is the mean over many of the scheduler's slices,
# not the luck of a few calls that fit in one.
#
#   bench/contention.sh [BUILDDIR]      (default: the source tree; build first)
#   REPS=3 LOAD=6 MINTIME=0.3 QUIET=1 (0: skip the quiet cadre turns) TIMEOUT=600 (per run)
#   CADRE_ENV="CADRE_WAIT=spin" (variables for cadre's runs only)
#   KEEP=DIR (each turn's figures copied there: cadre.q, cadre.l, ompi.l, gloo.l)
#
# Before each turn, quiet and loaded, it prints what the cache keeps of a
# working set of 16, 32 and 64 MiB read over and over (bench/cache_life.c):
# here, quiet, all three at cache speed; beside six `yes`, 16 MiB only.
#
# Prints the medians: cadre quiet and loaded, loaded/quiet, Open MPI and gloo
# loaded, cadre's speedup over each, and the goal's verdict per size (at
# least 1.5x both peers, at most 6x cadre's quiet time).
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
reps=${REPS:-3}
load=${LOAD:-6}
quiet=${QUIET:-1}
limit=${TIMEOUT:-600}
mintime=${MINTIME:-0.3}
python=/usr/bin/python3

command -v mpicc >/dev/null && mpirun --version 2>&1 | grep -q "Open MPI" ||
    { echo "contention.sh: needs Open MPI's mpicc and mpirun (Debian: openmpi-bin libopenmpi-dev)" >&2; exit 1; }
"$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    { echo "contention.sh: needs $python with torch (Debian: python3-torch)" >&2; exit 1; }
mpicc -O2 -o "$tmp/mpi_coll" "$here/mpi_coll.c"
cc -O2 -o "$tmp/cache_life" "$here/cache_life.c"
# What the cache keeps of a working set read over and over (bench/cache_life.c),
# one line: "16 MiB 27.4 GB/s, 32 MiB ...".
cache_life() {
    MINTIME=0.3 "$tmp/cache_life" 16 32 64 | awk '!/^#/ { printf "%s%s MiB %s GB/s", n++ ? ", " : "", $1, $3 }'
}

yes_pids=()
stop_load() {
    if [ ${#yes_pids[@]} -gt 0 ]; then
        kill "${yes_pids[@]}" 2>/dev/null || true
        wait "${yes_pids[@]}" 2>/dev/null || true
    fi
    yes_pids=()
    return 0
}
trap 'stop_load; rm -rf "$tmp"' EXIT
start_load() {
    for _ in $(seq "$load"); do
        yes > /dev/null &
        yes_pids+=($!)
    done
}

# One run of one library: "size time_us" lines. A run that fails or times
# out keeps the sizes it finished.
run_lib() { # lib
    local cmd
    case $1 in
    cadre) cmd=(env ${CADRE_ENV:-} "$cadrerun" -n 2 "$perf" allreduce -b 8 -e 64M -f 2 -c 0 -n 1 -w 2 -T "$mintime") ;;
    ompi) cmd=(mpirun -np 2 "$tmp/mpi_coll" allreduce 8 67108864 1 2 "$mintime") ;;
    gloo) cmd=("$python" "$here/gloo_coll.py" 2 8 67108864 1 2 "$mintime") ;;
    esac
    timeout "$limit" "${cmd[@]}" > "$tmp/out" 2> "$tmp/err" ||
        echo "contention.sh: '${cmd[*]}' failed ($?): $(tail -1 "$tmp/err")" >&2
    awk '!/^#/ && NF >= 6 { print $1, $6 }' "$tmp/out"
}

echo "contention.sh: $(date -u '+%F %H:%M') UTC, commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores, $reps turns, $load yes when loaded" >&2
: > "$tmp/cadre.q"; : > "$tmp/cadre.l"; : > "$tmp/ompi.l"; : > "$tmp/gloo.l"
for turn in $(seq "$reps"); do
    if [ "$quiet" = 1 ]; then
        echo "contention.sh: turn $turn: quiet, c2c $("$tmp/c2c" 2>/dev/null | tail -1), sets read again: $(cache_life)" >&2
        run_lib cadre >> "$tmp/cadre.q"
    fi
    # The placement of the vCPUs before the load comes and after it goes
    # (c2c under the load would time the yes, not the caches).
    before=$("$tmp/c2c" 2>/dev/null | tail -1)
    start_load
    sleep 1
    echo "contention.sh: turn $turn: loaded (load average $(cut -d' ' -f1 /proc/loadavg)), c2c before it $before, sets read again: $(cache_life)" >&2
    for lib in cadre ompi gloo; do
        run_lib $lib >> "$tmp/$lib.l"
    done
    stop_load
    echo "contention.sh: turn $turn: after the load, c2c $("$tmp/c2c" 2>/dev/null | tail -1)" >&2
done

# KEEP=DIR: each turn's figures too (size and µs per line, turn after turn).
if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    cp "$tmp/cadre.q" "$tmp/cadre.l" "$tmp/ompi.l" "$tmp/gloo.l" "$KEEP/"
fi
for f in cadre.q cadre.l ompi.l gloo.l; do size_median < "$tmp/$f" > "$tmp/$f.m"; done
echo
echo "| size | cadre quiet (µs) | cadre loaded (µs) | loaded/quiet | Open MPI loaded (µs) | gloo loaded (µs) | vs Open MPI | vs gloo | goal |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|"
awk '
    { f = FILENAME ~ /cadre\.q/ ? 1 : FILENAME ~ /cadre\.l/ ? 2 : FILENAME ~ /ompi/ ? 3 : 4
       v[f, $1] = $2; if (!($1 in seen)) { seen[$1] = 1; sizes[++n] = $1 } }
    END {
        for (i = 1; i <= n; i++) {
            z = sizes[i]; q = v[1, z]; l = v[2, z]; o = v[3, z]; g = v[4, z]
            if (l == "") continue
            r = q > 0 ? sprintf("%.1fx", l / q) : "-"
            so = o > 0 && l > 0 ? o / l : 0; sg = g > 0 && l > 0 ? g / l : 0
            ok = so >= 1.5 && sg >= 1.5 && (q == "" || l <= 6 * q)
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", z, q == "" ? "-" : q, l, r,
                o == "" ? "-" : o, g == "" ? "-" : g, so ? sprintf("%.2fx", so) : "-",
                sg ? sprintf("%.2fx", sg) : "-", ok ? "met" : "**not met**"
        }
    }' "$tmp/cadre.q.m" "$tmp/cadre.l.m" "$tmp/ompi.l.m" "$tmp/gloo.l.m"
