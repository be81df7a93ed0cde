#!/usr/bin/env bash
# The ucx transport (UCX_TLS=tcp: UCX's tcp transport, the only one between
# network namespaces; no RDMA here) against cadre's own tcp between hosts, on
# the namespace test bed of tests/hosts, in the same run, turns alternated
# (issue 42). Every job runs under the test bed's mpirun with
# CADRE_TRANSPORT=shm,ucx or shm,tcp, and its CADRE_DEBUG=INFO lines must show
# that transport for every peer on the other host. Parts (PARTS):
#   lat    2 hosts x 1 rank: cadre-perf sendrecv, 8 B to 64 KiB, one-way us
#   bw     2 hosts x 1 rank: cadre-perf stream (window 64), 64 KiB to 16 MiB, MB/s
#   ar16   2 hosts x 2 ranks: allreduce float32 of 16 MiB (the issue's goal:
#          ucx within 1.5x of tcp)
#   sweep  2 hosts x 2 ranks: allreduce 8 B to 64 MiB, results checked (-c 1):
#          no hang (each job under TIMEOUT s), no size slower than 1.5x
#
#   bench/ucx.sh [BUILDDIR]     (as root; default: the source tree, built)
#   REPS=3 PARTS="lat bw ar16 sweep" TRANSPORTS="ucx tcp" TIMEOUT=300
#
# Prints one markdown table per part: the median of REPS turns per size and
# transport, and ucx's time over tcp's (above 1 is slower). TRANSPORTS="tcp
# tcp" runs the script where cadre has no UCX (both columns cadre's tcp).
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh" "$@"
# shellcheck source=../tests/hosts/lib.sh
. "$top/tests/hosts/lib.sh"
reps=${REPS:-3}
parts=${PARTS:-lat bw ar16 sweep}
read -r -a tps <<<"${TRANSPORTS:-ucx tcp}"
((${#tps[@]} == 2)) || { echo "ucx.sh: TRANSPORTS needs two names" >&2; exit 2; }
export TB_TIMEOUT=${TIMEOUT:-300}
for t in "${tps[@]}"; do
    [[ $t == ucx ]] && tb_need_ucx "$build"
done
echo "ucx.sh: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2

tb_init 2
trap 'rm -rf "$tmp"; tb_down' EXIT
failed=0

# run_one T NH PPN ARGS...: one cadre-perf job over transport T; appends
# "size time_us" (out of place, column 6) to $tmp/cur. A job that fails, ends
# at the timeout, reports a wrong element or took another transport is said
# and counted.
run_one() {
    local t=$1 nh=$2 ppn=$3
    shift 3
    local rc=0
    # Exported for the job only (tb_mpirun passes CADRE_* and UCX_* on); not
    # in a subshell, whose launch tb_down would not know to stop.
    export CADRE_TRANSPORT="shm,$t" CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P
    if [[ $t == ucx ]]; then export UCX_TLS=tcp; else unset UCX_TLS; fi
    TB_LAUNCH_ARGS="" tb_mpirun "$nh" "$ppn" block "$perf" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    unset CADRE_TRANSPORT CADRE_DEBUG CADRE_DEBUG_SUBSYS UCX_TLS
    local bad=""
    ((rc == 0)) || bad="exit $rc$( ((rc == 124)) && echo " (timed out after $TB_TIMEOUT s)")"
    awk '!/^#/ && NF >= 9 && ($9 != 0 || (NF >= 13 && $13 != 0)) { w = 1 } END { exit !w }' "$tmp/out" &&
        bad+="${bad:+, }wrong elements"
    local far want other
    far=$(grep -cE "^\[rank [0-9]+ INFO P2P\] peer [0-9]+: $t\$" "$tmp/err" || true)
    other=$(grep -E '^\[rank [0-9]+ INFO P2P\] peer [0-9]+: ' "$tmp/err" | grep -cvE ': (shm|'"$t"')$' || true)
    want=$((nh * ppn * (nh - 1) * ppn))
    ((far == want && other == 0)) || bad+="${bad:+, }$far peers on $t (want $want), $other on another"
    if [[ -n $bad ]]; then
        echo "ucx.sh: $t ${nh}x$ppn $*: FAILED: $bad" >&2
        grep -v ' INFO ' "$tmp/err" | tail -5 >&2
        failed=$((failed + 1))
    fi
    awk '!/^#/ && NF >= 6 { print $1, $6 }' "$tmp/out" >>"$tmp/cur"
}

# part NAME TITLE UNIT NH PPN ARGS...: REPS turns of both transports, the
# first of a turn alternating; then the table. UNIT us: times; MB/s: size
# over time.
part() {
    local name=$1 title=$2 unit=$3 nh=$4 ppn=$5 r i j t
    shift 5
    : >"$tmp/$name.0.all"
    : >"$tmp/$name.1.all"
    for ((r = 1; r <= reps; r++)); do
        for i in 0 1; do
            j=$(((i + r + 1) % 2))
            t=${tps[$j]}
            echo "ucx.sh: $name, $t, turn $r of $reps" >&2
            : >"$tmp/cur"
            run_one "$t" "$nh" "$ppn" "$@"
            cat "$tmp/cur" >>"$tmp/$name.$j.all"
        done
    done
    for j in 0 1; do size_median <"$tmp/$name.$j.all" | sort -k1,1 >"$tmp/$name.$j.med"; done
    echo
    echo "### $title: medians of $reps turns, $unit"
    echo
    echo "| bytes | ${tps[0]} | ${tps[1]} | ${tps[0]} time / ${tps[1]} time |"
    echo "|---:|---:|---:|---:|"
    join -a 1 -a 2 -e '?' -o 0,1.2,2.2 "$tmp/$name.0.med" "$tmp/$name.1.med" | sort -n |
        awk -v unit="$unit" '
            function show(s, t) { return t == "?" ? "?" : unit == "MB/s" ? sprintf("%.0f", s / t) : t }
            { r = ($2 != "?" && $3 != "?" && $3 > 0) ? sprintf("%.2f", $2 / $3) : "?"
              if (r != "?" && r + 0 > 1.5) r = r " (over 1.5)"
              printf "| %s | %s | %s | %s |\n", $1, show($1, $2), show($1, $3), r }'
}

for p in $parts; do
    case $p in
    lat) part lat "sendrecv latency, 2 hosts x 1 rank, one way" us 2 1 sendrecv -b 8 -e 65536 -f 4 -n 2000 -w 100 ;;
    bw) part bw "stream bandwidth (window 64), 2 hosts x 1 rank" MB/s 2 1 stream -b 65536 -e 16777216 -f 4 -W 64 -n 5 -w 1 ;;
    ar16) part ar16 "allreduce float32 sum of 16 MiB, 2 hosts x 2 ranks (block)" us 2 2 allreduce \
        -b 16777216 -e 16777216 -n 20 -w 3 -c 1 ;;
    sweep) part sweep "allreduce float32 sum 8 B to 64 MiB, 2 hosts x 2 ranks (block), results checked" us 2 2 \
        allreduce -b 8 -e 67108864 -f 4 -n 20 -w 3 -c 1 ;;
    *) echo "ucx.sh: unknown part $p (lat bw ar16 sweep)" >&2; exit 2 ;;
    esac
done
echo
echo "ucx.sh: $(date -u '+%Y-%m-%d %H:%M') UTC, commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'), load after $(cut -d' ' -f1-3 /proc/loadavg), $failed failed jobs" >&2
exit $((failed > 0))
