#!/usr/bin/env bash
# Every collective the way the standard MPI benchmarks time them, cadre beside
# Open MPI in the same run, turns alternated.
#
# The OSU micro-benchmarks (osu_bcast, osu_allreduce, ...) and the Intel MPI
# Benchmarks time each call on its own with a barrier after it, and average
# the ranks' means: every call starts from idle ranks. cadre-perf does that
# with -t barrier, and bench/mpi_coll.c (built here with Open MPI's mpicc)
# with TIMING=barrier; with TIMING=loop (the default of both) the calls run
# back to back instead (nccl-tests' loop). Both use the same sizes (nccl-tests':
# count x type size for allreduce, reduce and bcast, the whole buffer for the
# others; the v-variants in cadre-perf's layout, cadre-perf(1)), iterations
# and warm-ups, out of place, root 0; uint8 for the modes that move data and
# float32 sum for the reductions.
#
#   bench/std.sh [BUILDDIR]
#   MODES="bcast gather ..."  NPS="2 4"  MINB=1 MAXB=16M  REPS=3  TIMING=barrier|loop
#   SHAPES="2x1 2x2" (the test bed, in place of NPS)
#   ITERS=N WARM=N (default: by size, as cadre-perf; ITERS4/WARM4 for the
#   oversubscribed runs: 200/20)  TIMEOUT=600 (seconds per run)
#
# 2 ranks are bound to a core each (cadrerun --bind-to core, mpirun --bind-to
# core); more ranks than cores run unbound (mpirun --oversubscribe).
#
# Across hosts (as root): SHAPES="2x1 2x2" (hosts x ranks per host) runs
# both libraries on the network-namespace test bed of tests/hosts instead of
# NPS, started by Open MPI's mpirun with block placement, unbound, as
# bench/hosts.sh does; Open MPI with --mca btl tcp,self,vader (shared memory
# within a host, its tcp between hosts), cadre with its defaults (shm within,
# tcp between). Prints,
# per mode and rank count, the median of REPS turns per size for each library
# and Open MPI's time over cadre's (above 1: cadre is faster), then the sizes
# where cadre is slower. Each table is followed by the core-to-core round trip
# (bench/c2c.c) taken before each turn of each library: the VM's state, which moves
# the 2-rank figures 2-3x. With TIMING=barrier a second table per mode gives
# whole iterations, the call and the barrier after it: where the ranks leave
# a barrier in a different order (Open MPI's lets rank 0 out first, tens of
# microseconds ahead on 4 ranks on 2 cores, so the rooted calls of root 0
# find their data there), the wait for a rank that is not running moves
# between the timed call and the untimed barrier, and only this sum
# compares the libraries' work.
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
modes=${MODES:-"barrier bcast reduce allreduce gather scatter allgather reduce_scatter alltoall
    gatherv scatterv allgatherv alltoallv"}
nps=${NPS:-"2 4"}
minb=${MINB:-1}
maxb=${MAXB:-16M}
reps=${REPS:-3}
timing=${TIMING:-barrier}
limit=${TIMEOUT:-600}
case $timing in loop | barrier) ;; *) echo "std.sh: TIMING is loop or barrier" >&2; exit 2 ;; esac
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    { echo "std.sh: needs Open MPI (Debian: openmpi-bin libopenmpi-dev)" >&2; exit 1; }
mpicc -O2 -o "$tmp/mpi_coll" "$here/mpi_coll.c"
shapes=${SHAPES:-}
if [ -n "$shapes" ]; then
    # shellcheck source=../tests/hosts/lib.sh
    . "$top/tests/hosts/lib.sh"
    . "$top/tests/hosts/launch.sh"
    export TB_TIMEOUT=$limit
    maxh=0
    for sh in $shapes; do
        case $sh in [1-9]x[1-9]) ;; *) echo "std.sh: SHAPES are HOSTSxRANKS, not '$sh'" >&2; exit 2 ;; esac
        [ "${sh%x*}" -gt "$maxh" ] && maxh=${sh%x*}
    done
    tb_init "$maxh"
    trap 'rm -rf "$tmp"; tb_down' EXIT
    nps=$shapes
fi
rev=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "std.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), cadre $rev, TIMING=$timing, REPS=$reps," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2

bytes() { # a size with K/M/G -> bytes
    awk -v s="$1" 'BEGIN { m = 1; if (s ~ /[Kk]$/) m = 1024; if (s ~ /[Mm]$/) m = 1048576;
        if (s ~ /[Gg]$/) m = 1073741824; sub(/[KkMmGg]$/, "", s); printf "%d", s * m }'
}
maxbytes=$(bytes "$maxb")

# One turn of one library: "size time_us" lines.
turn() { # lib mode np (or a shape HxR with SHAPES)
    local lib=$1 mode=$2 np=$3 type=uint8 ts=1 lo nh=0 ppn=0
    if [ -n "$shapes" ]; then
        nh=${np%x*} ppn=${np#*x} np=$((nh * ppn))
    fi
    case $mode in reduce | allreduce | reduce_scatter) type=float32 ts=4 ;; esac
    lo=$(bytes "$minb")
    case $mode in
    allgather | reduce_scatter | alltoall | gather | scatter | *v)
        [ "$lo" -ge $((np * ts)) ] || lo=$((np * ts)) ;;
    *) [ "$lo" -ge "$ts" ] || lo=$ts ;;
    esac
    local it=${ITERS:-0} wm=${WARM:--1}
    if [ "$np" -gt "$(nproc)" ]; then
        it=${ITERS4:-200} wm=${WARM4:-20}
    fi
    local cmd
    if [ "$nh" -gt 0 ]; then
        local rc=0
        if [ "$lib" = cadre ]; then
            local opt=(-b "$lo" -e "$maxbytes" -f 2 -d "$type" -t "$timing" -c 0)
            [ "$it" -gt 0 ] && opt+=(-n "$it")
            [ "$wm" -ge 0 ] && opt+=(-w "$wm")
            TB_LAUNCH_ARGS="" tb_mpirun "$nh" "$ppn" block "$perf" "$mode" "${opt[@]}" \
                > "$tmp/out" 2> "$tmp/err" || rc=$?
        else
            TB_LAUNCH_ARGS="--mca btl tcp,self,vader" tb_mpirun "$nh" "$ppn" block \
                "$tmp/mpi_coll" "$mode" "$lo" "$maxbytes" "$it" "$wm" 0 "$timing" "$type" \
                > "$tmp/out" 2> "$tmp/err" || rc=$?
        fi
        [ "$rc" -eq 0 ] || echo "std.sh: $lib $mode on ${nh}x$ppn failed ($rc): $(tail -1 "$tmp/err")" >&2
        awk '!/^#/ && NF >= 6 { print $1, $6 }' "$tmp/out"
        awk '/^# iteration  size / { print $4, $6 }' "$tmp/out" >> "$tmp/$lib.it"
        return 0
    fi
    if [ "$lib" = cadre ]; then
        local opt=(-b "$lo" -e "$maxbytes" -f 2 -d "$type" -t "$timing" -c 0)
        [ "$it" -gt 0 ] && opt+=(-n "$it")
        [ "$wm" -ge 0 ] && opt+=(-w "$wm")
        if [ "$np" -gt "$(nproc)" ]; then
            cmd=("$cadrerun" -n "$np" --bind-to none "$perf" "$mode" "${opt[@]}")
        else
            cmd=("$cadrerun" -n "$np" --bind-to core "$perf" "$mode" "${opt[@]}")
        fi
    else
        local bind=(--bind-to core)
        [ "$np" -gt "$(nproc)" ] && bind=(--oversubscribe --bind-to none)
        cmd=(mpirun -np "$np" "${bind[@]}" "$tmp/mpi_coll" "$mode" "$lo" "$maxbytes" "$it" "$wm" 0
             "$timing" "$type")
    fi
    timeout "$limit" "${cmd[@]}" > "$tmp/out" 2> "$tmp/err" ||
        echo "std.sh: '${cmd[*]}' failed ($?): $(tail -1 "$tmp/err")" >&2
    awk '!/^#/ && NF >= 6 { print $1, $6 }' "$tmp/out"
    awk '/^# iteration  size / { print $4, $6 }' "$tmp/out" >> "$tmp/$lib.it"
}

# A table of "size cadre-time ompi-time" medians, and the sizes where cadre
# is slower (in $slower).
table() { # cadre-file ompi-file
    size_median < "$1" > "$tmp/cadre.med"
    size_median < "$2" > "$tmp/ompi.med"
    echo "| size (B) | cadre (µs) | Open MPI (µs) | Open MPI / cadre |"
    echo "|---:|---:|---:|---:|"
    join -a 1 -a 2 -e '?' -o 0,1.2,2.2 <(sort -k1,1 "$tmp/cadre.med") <(sort -k1,1 "$tmp/ompi.med") |
        sort -n | awk '{ r = ($2 == "?" || $3 == "?" || $2 <= 0) ? "—" : sprintf("%.2f", $3 / $2)
                         printf "| %s | %s | %s | %s |\n", $1, $2, $3, r }' | tee "$tmp/table"
    slower=$(awk -F'|' '$5 ~ /[0-9]/ && $5 + 0 < 1 { gsub(/ /, "", $2); printf "%s%s", s, $2; s = " " }' "$tmp/table")
}

slower_all="" slower_it=""
for np in $nps; do
    for mode in $modes; do
        : > "$tmp/cadre"
        : > "$tmp/ompi"
        : > "$tmp/cadre.it"
        : > "$tmp/ompi.it"
        : > "$tmp/cadre.c2c"
        : > "$tmp/ompi.c2c"
        for ((r = 1; r <= reps; r++)); do
            # alternate which library goes first
            if ((r % 2)); then order="cadre ompi"; else order="ompi cadre"; fi
            for lib in $order; do
                # The vCPUs' core-to-core round trip before the turn (bench/c2c.c):
                # where the host moves them apart the 2-rank figures of both
                # libraries move 2-3x, so a turn is read with its state.
                c2c=$("$tmp/c2c" | awk '/c2c_ns/ { print $2 }')
                echo "$c2c" >> "$tmp/$lib.c2c"
                echo "std.sh: $mode, $np ranks, $lib, turn $r of $reps, c2c $c2c ns" >&2
                turn "$lib" "$mode" "$np" >> "$tmp/$lib"
            done
        done
        echo
        if [ -n "$shapes" ]; then
            echo "### $mode, ${np%x*} hosts x ${np#*x} ranks ($timing timing; median of $reps turns)"
        else
            echo "### $mode, $np ranks ($timing timing; median of $reps turns)"
        fi
        echo
        table "$tmp/cadre" "$tmp/ompi"
        echo
        echo "c2c before each turn (ns): cadre $(tr '\n' ' ' < "$tmp/cadre.c2c"); Open MPI $(tr '\n' ' ' < "$tmp/ompi.c2c")"
        [ -n "$slower" ] && slower_all="$slower_all
- $mode, $np ranks: cadre slower at $slower B"
        if [ -s "$tmp/cadre.it" ]; then
            echo
            echo "Whole iterations, the call and the barrier after it (mean over the ranks):"
            echo
            table "$tmp/cadre.it" "$tmp/ompi.it"
            [ -n "$slower" ] && slower_it="$slower_it
- $mode, $np ranks: cadre slower at $slower B"
        fi
    done
done
echo
echo "Sizes where Open MPI is faster (median):${slower_all:- none}"
if [ "$timing" = barrier ]; then
    echo "... in whole iterations (the call and the barrier after it):${slower_it:- none}"
fi
