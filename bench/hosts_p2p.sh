#!/usr/bin/env bash
# Point-to-point across hosts: 2 hosts x 1 rank of the network-namespace test
# bed of tests/hosts (each host a namespace with a veth on a bridge; the
# hosts share this machine's cores), cadre beside Open MPI in the same run,
# both started by the test bed's mpirun (--bind-to none); Open MPI with
# --mca btl tcp,self,vader, so the two ranks talk over its tcp btl and cadre
# over its TCP transport. The sibling of bench/hosts.sh (collectives).
#   ping-pong latency: cadre-perf sendrecv against bench/mpi_pingpong.c
#     sendrecv (the same loop: rank 0 sends then receives, rank 1 receives
#     then sends, one buffer for both as in cadre-perf's in-place column;
#     one-way time = elapsed / iterations / 2, after the same warm-ups);
#   windowed bandwidth: cadre-perf stream against mpi_pingpong stream (64
#     isends from a buffer each, waitall, a 1-byte ack; irecvs into a buffer
#     each; time = elapsed / windows / 64, like osu_bw).
#
#   bench/hosts_p2p.sh [BUILDDIR]      (as root; default: the source tree, built)
#   REPS=3 ITERS=2000 LATMIN=1 BWMIN=8 MAXB=65536 MODES="sendrecv stream"
#
# ITERS: round trips (sendrecv) per size, and ITERS/10 windows (stream);
# each rep runs cadre then Open MPI (alternated turns), and the table gives
# the median per size of REPS: one-way µs (sendrecv) or µs per message
# (stream), and Open MPI's time over cadre's (> 1: cadre faster).
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
# shellcheck source=../tests/hosts/lib.sh
. "$top/tests/hosts/lib.sh"
. "$top/tests/hosts/launch.sh"
reps=${REPS:-3}
iters=${ITERS:-2000}
latmin=${LATMIN:-1}
bwmin=${BWMIN:-8}
maxb=${MAXB:-65536}
modes=${MODES:-sendrecv stream}
export TB_TIMEOUT=${TIMEOUT:-900}

command -v mpicc >/dev/null || { echo "hosts_p2p.sh: needs mpicc (libopenmpi-dev)" >&2; exit 1; }
mpicc -O2 -o "$tmp/mpi_pingpong.ompi" "$here/mpi_pingpong.c"
echo "hosts_p2p.sh: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2

tb_init 2
trap 'rm -rf "$tmp"; tb_down' EXIT

# One run of one mode: "size time_us" lines.
run_lib() { # lib mode
    local lib=$1 mode=$2 minb n col
    if [[ $mode == sendrecv ]]; then minb=$latmin n=$iters col=10; else minb=$bwmin n=$((iters / 10 + 1)) col=6; fi
    if [[ $lib == cadre ]]; then
        TB_LAUNCH_ARGS="" tb_mpirun 2 1 block "$perf" "$mode" -b "$minb" -e "$maxb" -f 2 \
            -c 0 -n "$n" >"$tmp/out" 2>"$tmp/err" ||
            echo "hosts_p2p.sh: cadre run failed: $(tail -1 "$tmp/err")" >&2
        awk -v c=$col '!/^#/ && NF >= 10 { print $1, $c }' "$tmp/out"
    else
        TB_LAUNCH_ARGS="--mca btl tcp,self,vader" tb_mpirun 2 1 block \
            "$tmp/mpi_pingpong.ompi" "$mode" "$minb" "$maxb" many "$n" >"$tmp/out" 2>"$tmp/err" ||
            echo "hosts_p2p.sh: Open MPI run failed: $(tail -1 "$tmp/err")" >&2
        awk '!/^#/ && NF >= 2 { print $1, $2 }' "$tmp/out"
    fi
}

for mode in $modes; do
    : >"$tmp/cadre.$mode"
    : >"$tmp/ompi.$mode"
done
for ((r = 1; r <= reps; r++)); do
    for mode in $modes; do
        for lib in cadre ompi; do
            echo "hosts_p2p.sh: $mode, 2 hosts x 1, $lib, run $r of $reps" >&2
            run_lib $lib "$mode" >>"$tmp/$lib.$mode"
        done
    done
done
for mode in $modes; do
    echo
    if [[ $mode == sendrecv ]]; then
        echo "### ping-pong latency (sendrecv), 2 hosts x 1 rank, TCP: one-way µs, medians of $reps"
    else
        echo "### windowed bandwidth (stream, window 64), 2 hosts x 1 rank, TCP: µs per message, medians of $reps"
    fi
    echo
    echo "| bytes | cadre | Open MPI | Open MPI / cadre |"
    echo "|---:|---:|---:|---:|"
    median_rows "$tmp/cadre.$mode" "$tmp/ompi.$mode"
done
echo
echo "hosts_p2p.sh: $(date -u '+%Y-%m-%d %H:%M') UTC, commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'), load after $(cut -d' ' -f1-3 /proc/loadavg)" >&2
