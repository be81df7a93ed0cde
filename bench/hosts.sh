#!/usr/bin/env bash
# Across hosts: allreduce (float32, sum) on the network-namespace test bed of
# tests/hosts (each host a namespace with a veth on a bridge; the hosts share
# this machine's cores), cadre beside Open MPI in the same run, both started
# by Open MPI's mpirun with the same hosts, placement and --bind-to none;
# Open MPI with --mca btl tcp,self,vader (shared memory within a host, TCP
# between hosts). cadre-perf allreduce against bench/mpi_coll.c (the same
# loop, sizes, iterations and warm-ups; the largest time over the ranks).
#
#   bench/hosts.sh [BUILDDIR]     (as root; default: the source tree, built)
#   SHAPES="2x1 2x2 3x2" REPS=3 ITERS=20 WARM=3 MAXB=67108864 MODE=allreduce
#
# For each shape (hosts x ranks per host, block placement) REPS runs, the two
# libraries taking turns, and the median per size; prints one markdown table
# per shape with cadre's speedup over Open MPI.
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
# shellcheck source=../tests/hosts/lib.sh
. "$top/tests/hosts/lib.sh"
. "$top/tests/hosts/launch.sh"
shapes=${SHAPES:-2x1 2x2 3x2}
reps=${REPS:-3}
iters=${ITERS:-20}
warm=${WARM:-3}
maxb=${MAXB:-67108864}
mode=${MODE:-allreduce}
export TB_TIMEOUT=${TIMEOUT:-900}

command -v mpicc >/dev/null || { echo "hosts.sh: needs mpicc (libopenmpi-dev)" >&2; exit 1; }
mpicc -O2 -o "$tmp/mpi_coll.ompi" "$here/mpi_coll.c"
echo "hosts.sh: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2

tb_init 3
trap 'rm -rf "$tmp"; tb_down' EXIT

# One run: "size time_us" lines (out-of-place time, column 6 of both).
run_lib() { # lib nhosts ppn
    local lib=$1 nh=$2 ppn=$3
    if [[ $lib == cadre ]]; then
        TB_LAUNCH_ARGS="" tb_mpirun "$nh" "$ppn" block "$perf" "$mode" -b 8 -e "$maxb" -f 2 \
            -c 0 -n "$iters" -w "$warm" >"$tmp/out" 2>"$tmp/err" ||
            echo "hosts.sh: cadre run failed: $(tail -1 "$tmp/err")" >&2
    else
        TB_LAUNCH_ARGS="--mca btl tcp,self,vader" tb_mpirun "$nh" "$ppn" block \
            "$tmp/mpi_coll.ompi" "$mode" 8 "$maxb" "$iters" "$warm" >"$tmp/out" 2>"$tmp/err" ||
            echo "hosts.sh: Open MPI run failed: $(tail -1 "$tmp/err")" >&2
    fi
    awk '!/^#/ && NF >= 6 { print $1, $6 }' "$tmp/out"
}

for shape in $shapes; do
    nh=${shape%x*} ppn=${shape#*x}
    : >"$tmp/cadre"
    : >"$tmp/ompi"
    for ((r = 1; r <= reps; r++)); do
        for lib in cadre ompi; do
            echo "hosts.sh: $mode on $nh hosts x $ppn, $lib, run $r of $reps" >&2
            run_lib $lib "$nh" "$ppn" >>"$tmp/$lib"
        done
    done
    echo
    echo "### $mode, $nh hosts x $ppn ranks (block), float32 sum: medians of $reps, µs"
    echo
    echo "| bytes | cadre | Open MPI | speedup |"
    echo "|---:|---:|---:|---:|"
    median_rows "$tmp/cadre" "$tmp/ompi"
done
echo
echo "hosts.sh: $(date -u '+%Y-%m-%d %H:%M') UTC, commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'), load after $(cut -d' ' -f1-3 /proc/loadavg)" >&2
