#!/bin/bash
# tests/hosts/hosts-test.sh SCENARIO: one scenario of the multi-host tests
# (the hosts suite, tests/unit/test_hosts.c, runs each). Every job's result
# is checked by the program itself (element by element) and cadre's
# decisions by check.sh from its CADRE_DEBUG=INFO lines. Prints one line
# "hosts: ..." per job as it ends; exits 0 when all passed, 77 when the test
# bed cannot be made here (not root, no network namespaces), 1 otherwise.
# Needs CADRE_BUILDDIR (the build tree; default: the current directory).
set -u
source "$(dirname "$0")/lib.sh"
B=${CADRE_BUILDDIR:-$PWD}
FAILED=0

# job NAME LAUNCHER NH PPN PLACE PROGRAM [ARGS]: runs it, keeps its output in
# $TB_DIR/NAME.log; sets JOB_RC, JOB_SECS, JOB_LOG.
job() {
    local name=$1 launcher=$2
    shift 2
    JOB_LOG=$TB_DIR/$name.log
    local t0=$EPOCHREALTIME
    "tb_$launcher" "$@" >"$JOB_LOG" 2>&1
    JOB_RC=$?
    JOB_SECS=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
}

# report WHAT OK DETAIL: one progress line; a failure shows the job's output.
report() {
    if [[ $2 == ok ]]; then
        printf 'hosts: %s: ok, %s\n' "$1" "$3"
    else
        FAILED=1
        printf 'hosts: %s: FAILED, %s\n' "$1" "$3"
        printf -- '--- output of the job (%s)\n' "$JOB_LOG"
        grep -v ' WARN RUNTIME\] cadre_[a-z_]*: .*(CADRE_ERR_\(ARG\|STATE\))$' "$JOB_LOG" | tail -60
        printf -- '---\n'
    fi
}

# A job whose program checks its results, then its decisions.
# checked_job LAUNCHER NH PPN PLACE PASS_REGEX PASS_COUNT PROGRAM [ARGS]
checked_job() {
    local launcher=$1 nh=$2 ppn=$3 place=$4 pass=$5 count=$6 prog=$7
    shift 7
    local what="$launcher ${nh}x$ppn $place $(basename "$prog")"
    job "$launcher-${nh}x$ppn-$place-$(basename "$prog")" "$launcher" "$nh" "$ppn" "$place" "$prog" "$@"
    local got dec
    got=$(grep -c -E "$pass" "$JOB_LOG")
    if ((JOB_RC != 0 || got != count)); then
        report "$what" FAILED "exit $JOB_RC, $got of $count '$pass' lines, $JOB_SECS s"
        return
    fi
    if dec=$(tb_check_decisions "$JOB_LOG" "$nh" "$ppn" "$place"); then
        report "$what" ok "$JOB_SECS s; ${dec##*$'\n'}"
    else
        report "$what" FAILED "$JOB_SECS s, results right but decisions wrong:"$'\n'"$dec"
    fi
}

coll() {
    local launcher=$1 nh=$2 ppn=$3 place=$4
    CADRE_DEBUG=INFO COLL_BIG=100003 TB_CHECK_ALGO=1 \
        checked_job "$launcher" "$nh" "$ppn" "$place" '^coll_test [a-z-]+ +ok ' 6 "$B/tests/ranks/coll_test"
}

p2p() {
    local launcher=$1 nh=$2 ppn=$3 place=$4
    CADRE_DEBUG=INFO P2P_TESTS=self,pingpong,order,fanin,outstanding,sendrecv_ring,truncate,blocking_order,background \
        checked_job "$launcher" "$nh" "$ppn" "$place" '^p2p_test [a-z_]+ +ok ' 9 "$B/tests/ranks/p2p_test"
    CADRE_DEBUG=INFO checked_job "$launcher" "$nh" "$ppn" "$place" '^hosts_probe: rank [0-9]+ .* ok' \
        $((nh * ppn)) "$B/tests/hosts/hosts_probe"
}

case ${1-} in
clean)
    # What runs killed before their trap left (tb_claim cleans a slot whose
    # owner is gone); claims nothing.
    for d in "$TB_SLOTS"/*; do
        [[ -d $d ]] || continue
        owner=$(cat "$d/pid" 2>/dev/null)
        [[ -n $owner ]] && kill -0 "$owner" 2>/dev/null && continue
        tb_clean_slot "${d##*/}"
    done
    exit 0
    ;;
mpirun-coll)
    # Every shape and placement under mpirun.
    tb_init 3
    coll mpirun 2 2 block
    coll mpirun 2 2 cyclic
    coll mpirun 3 1 block
    coll mpirun 3 2 block
    coll mpirun 3 2 cyclic
    ;;
srun-coll)
    # Two shapes under srun: the launcher differs, not the algorithms.
    tb_init 3
    tb_slurm_up
    coll srun 2 2 cyclic
    coll srun 3 2 block
    ;;
mpirun-p2p)
    tb_init 3
    p2p mpirun 3 2 cyclic
    ;;
srun-p2p)
    tb_init 2
    tb_slurm_up
    p2p srun 2 2 block
    ;;
*)
    echo "usage: $0 clean|mpirun-coll|srun-coll|mpirun-p2p|srun-p2p" >&2
    exit 2
    ;;
esac
exit "$FAILED"
