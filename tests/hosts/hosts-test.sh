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
        # TB_KEEP=DIR keeps the failed job's whole output (the test bed's
        # directory goes at exit).
        [[ -n ${TB_KEEP-} ]] && mkdir -p "$TB_KEEP" && cp "$JOB_LOG" "$TB_KEEP/"
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

# coll LAUNCHER NH PPN PLACE [all]: coll_test's blocking collectives (all:
# the nonblocking ones too), counts 0, 1, 7, 1000 and 20011.
coll() {
    local launcher=$1 nh=$2 ppn=$3 place=$4 tests=reductions,movers,vvariants n=3
    # coll_test runs the tests whose names COLL_TESTS contains.
    [[ ${5-} == all ]] && tests=reductions-nb,movers-nb,vvariants-nb n=6
    CADRE_DEBUG=INFO COLL_BIG=20011 COLL_TESTS=$tests TB_CHECK_ALGO=1 \
        checked_job "$launcher" "$nh" "$ppn" "$place" '^coll_test [a-z-]+ +ok ' $n "$B/tests/ranks/coll_test"
}

p2p() {
    local launcher=$1 nh=$2 ppn=$3 place=$4
    CADRE_DEBUG=INFO P2P_TESTS=self,pingpong,order,fanin,outstanding,sendrecv_ring,truncate,blocking_order,background \
        checked_job "$launcher" "$nh" "$ppn" "$place" '^p2p_test [a-z_]+ +ok ' 9 "$B/tests/ranks/p2p_test"
    CADRE_DEBUG=INFO checked_job "$launcher" "$nh" "$ppn" "$place" '^hosts_probe: rank [0-9]+ .* ok' \
        $((nh * ppn)) "$B/tests/hosts/hosts_probe"
}

# The point-to-point jobs of the ucx scenario: p2p_test, then anymix_test
# (ANY_SOURCE and ANY_TAG receives mixed with specific ones, every byte).
p2p_mixed() {
    local launcher=$1 nh=$2 ppn=$3 place=$4
    CADRE_DEBUG=INFO P2P_TESTS=self,pingpong,order,fanin,outstanding,sendrecv_ring,truncate,blocking_order,background \
        checked_job "$launcher" "$nh" "$ppn" "$place" '^p2p_test [a-z_]+ +ok ' 9 "$B/tests/ranks/p2p_test"
    CADRE_DEBUG=INFO checked_job "$launcher" "$nh" "$ppn" "$place" '^anymix_test: rank [0-9]+ ok ' \
        $((nh * ppn)) "$B/tests/ranks/anymix_test"
}

# One hosts_probe job under mpirun at 3x2 cyclic; sets T_JOB. The decoys
# must not slow the start: within 2x the baseline + 5 s (a loaded machine).
ifaces_job() {
    local what=$1
    CADRE_DEBUG=INFO checked_job mpirun 3 2 cyclic '^hosts_probe: rank [0-9]+ .* ok' 6 "$B/tests/hosts/hosts_probe"
    T_JOB=$JOB_SECS
    if [[ -n ${T_BASE-} ]]; then
        local bound
        bound=$(awk -v b="$T_BASE" 'BEGIN { printf "%.1f", 2 * b + 5 }')
        if awk -v t="$T_JOB" -v b="$bound" 'BEGIN { exit !(t < b) }'; then
            report "$what: job time" ok "$T_JOB s, baseline $T_BASE s (bound $bound s)"
        else
            report "$what: job time" FAILED "$T_JOB s, baseline $T_BASE s: over the bound $bound s"
        fi
    fi
}

# lost KIND LAUNCHER: 3 hosts x 2 ranks (block) loop on allreduces; then
# every rank of host 2 is killed (KIND kill) or host 2's link is cut (cut).
# Every survivor (hosts 1 and 3) must see its allreduce fail with
# CADRE_ERR_PEER within 10 s (TB_LOST_WITHIN), naming a lost rank and its
# host, then a receive from a lost rank fail too within that bound, then
# finalize and exit.
lost() {
    local kind=$1 launcher=$2 nh=3 ppn=2 place=block victim=2 r within=${TB_LOST_WITHIN:-10}
    local lost_ranks=() survivors=() vname
    vname=$(tb_name "$victim")
    for ((r = 0; r < nh * ppn; r++)); do
        if (($(tb_host_of "$r" "$nh" "$ppn" "$place") == victim)); then
            lost_ranks+=("$r")
        else
            survivors+=("$r")
        fi
    done
    local what="$launcher ${nh}x$ppn: $vname ${kind/kill/killed (ranks ${lost_ranks[*]})}"
    what=${what/cut/cut off (ip link set $vname down)}
    JOB_LOG=$TB_DIR/lost-$kind-$launcher.log
    # mpirun stops the whole job when a rank dies, unless recovery is on.
    local extra=""
    [[ $launcher == mpirun ]] && extra=--enable-recovery
    HOSTS_LOST_RANK=${lost_ranks[0]} HOSTS_LOST_WAIT=300 TB_LAUNCH_ARGS=$extra TB_BACKGROUND=1 \
        "tb_$launcher" "$nh" "$ppn" "$place" "$B/tests/hosts/hosts_lost" >"$JOB_LOG" 2>&1
    local t
    for ((t = 0; t < 600; t++)); do
        (($(grep -c '^hosts_lost: rank [0-9]* on .* looping$' "$JOB_LOG") == nh * ppn)) && break
        kill -0 "$TB_LAST_PID" 2>/dev/null || break
        sleep 0.2
    done
    if (($(grep -c '^hosts_lost: rank [0-9]* on .* looping$' "$JOB_LOG") != nh * ppn)); then
        report "$what" FAILED "the job did not start its loop"
        return
    fi
    local t0=$EPOCHREALTIME pids
    if [[ $kind == kill ]]; then
        pids=$(tb_pids_of "$victim" hosts_lost)
        # shellcheck disable=SC2086
        kill -KILL $pids
    else
        tb_cut "$victim"
    fi
    # Each survivor's lines, or 30 s (2 bounds and 10 s).
    local wait_s=$((2 * within + 10))
    for ((t = 0; t < wait_s * 5; t++)); do
        (($(grep -c '^hosts_lost: rank [0-9]* on .* done' "$JOB_LOG") >= ${#survivors[@]})) && break
        sleep 0.2
    done
    local bad=() line when msg s worst=0
    for s in "${survivors[@]}"; do
        line=$(grep "^hosts_lost: rank $s on .*: allreduce failed at " "$JOB_LOG" | head -1)
        if [[ -z $line ]]; then
            bad+=("rank $s: no error within $wait_s s")
            continue
        fi
        when=${line#*allreduce failed at }
        when=${when%% *}
        msg=${line#*: allreduce failed at * at iteration * }
        worst=$(awk -v a="$t0" -v b="$when" -v m="$worst" 'BEGIN { d = b - a; printf "%.1f", (d > m ? d : m) }')
        if ! awk -v a="$t0" -v b="$when" -v w="$within" 'BEGIN { exit !(b - a < w) }'; then
            bad+=("rank $s: the error came $(awk -v a="$t0" -v b="$when" 'BEGIN { printf "%.1f", b - a }') s after the $kind")
        fi
        [[ $line == *"(CADRE_ERR_PEER"* ]] || bad+=("rank $s: not CADRE_ERR_PEER: $line")
        [[ $msg == *"$vname"* ]] || bad+=("rank $s: the message does not name host $vname: $msg")
        # The first failure seen may be one rank's: at least one lost rank.
        local named=0
        for r in "${lost_ranks[@]}"; do
            [[ $msg =~ rank[s]?\ ([0-9]+[, ]+)*$r([^0-9]|$) ]] && named=1
        done
        ((named)) || bad+=("rank $s: the message names none of the lost ranks ${lost_ranks[*]}: $msg")
        line=$(grep "^hosts_lost: rank $s on .*: recv from rank" "$JOB_LOG" | head -1)
        if [[ $line != *"(CADRE_ERR_PEER"* ]]; then
            bad+=("rank $s: the receive from lost rank ${lost_ranks[0]}: ${line:-no line}")
        elif ! awk -v l="$line" -v w="$within" 'BEGIN { sub(/.*failed after /, "", l); exit !(l + 0 < w) }'; then
            bad+=("rank $s: $line")
        fi
        grep -q "^hosts_lost: rank $s on .* done" "$JOB_LOG" || bad+=("rank $s did not finalize")
    done
    # The survivors' processes end (the lost host's may hang on with a cut link).
    for ((t = 0; t < 50; t++)); do
        pids=$(for ((r = 1; r <= nh; r++)); do ((r != victim)) && tb_pids_of "$r" hosts_lost; done)
        [[ -z $pids ]] && break
        sleep 0.2
    done
    [[ -z $pids ]] || bad+=("survivor processes still running 10 s later: $(echo $pids)")
    if ((${#bad[@]} == 0)); then
        report "$what" ok "every survivor's allreduce and receive failed within $within s (the last allreduce $worst s after the $kind) naming $vname; they exited"
    else
        report "$what" FAILED "$(printf '\n  %s' "${bad[@]}")"
    fi
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
    coll mpirun 2 2 block all
    coll mpirun 2 2 cyclic
    coll mpirun 3 1 block
    coll mpirun 3 2 block
    coll mpirun 3 2 cyclic
    ;;
srun-coll)
    # Two shapes under srun: the launcher differs, not the algorithms.
    tb_init 3
    tb_slurm_up
    coll srun 2 2 cyclic all
    coll srun 3 2 block
    ;;
mpirun-p2p)
    tb_init 3
    p2p mpirun 3 2 cyclic
    ;;
rdv)
    # Started without a launcher (RANK, WORLD_SIZE, MASTER_ADDR=host 1's name):
    # the hosts from the hostnames, TCP between them at their addresses.
    tb_init 3
    coll rdv 2 2 cyclic
    coll rdv 3 1 block
    p2p rdv 3 2 block
    ;;
srun-p2p)
    tb_init 2
    tb_slurm_up
    p2p srun 2 2 block
    ;;
ifaces)
    # A decoy address the same on every host (docker0) and an unreachable one
    # (eth1), both listed before eth0, then CADRE_SOCKET_IFNAME.
    TB_EXTRA_IFS=1 tb_init 3
    unset T_BASE
    ifaces_job "baseline"
    T_BASE=$T_JOB
    tb_add_decoy
    tb_add_dead
    # By default docker* is never used; eth1 may be listened on, but every
    # peer is reached on eth0 (check.sh). Loopback is allowed beside the
    # chosen interfaces, for the peers of the rank's own host.
    TB_CHECK_FORBID='^172[.]31[.]' ifaces_job "docker0 and unreachable eth1, default"
    CADRE_SOCKET_IFNAME==eth0 TB_CHECK_IFNAME='^(eth0|lo)$' TB_CHECK_FORBID='^172[.]31[.]|^10[.]214[.]' \
        ifaces_job "CADRE_SOCKET_IFNAME==eth0"
    CADRE_SOCKET_IFNAME='^docker,eth1' TB_CHECK_FORBID='^172[.]31[.]|^10[.]214[.]' \
        ifaces_job "CADRE_SOCKET_IFNAME=^docker,eth1"
    ;;
lost-kill)
    tb_init 3
    lost kill mpirun
    tb_slurm_up
    lost kill srun
    ;;
lost-cut)
    tb_init 3
    lost cut mpirun
    ;;
ucx)
    # Issue 42: CADRE_TRANSPORT=shm,ucx with UCX_TLS=tcp between the hosts
    # (no RDMA here: UCX's tcp transport, its verbs path never runs), shm
    # within; check.sh holds every peer to that (TB_CHECK_REMOTE). coll_test
    # and p2p_test at 2x2 and 3x2 under mpirun and srun, ANY_SOURCE mixed
    # with specific receives, then a host killed (srun) and a link cut
    # (mpirun, last: the cut host stays cut): errors within 15 s naming the
    # host. UCX finds eth0 by itself (ucx_info -d in a host lists eth0 and
    # lo; a lo address is never offered to another host); the srun half sets
    # UCX_NET_DEVICES=eth0 as a cluster's recipe does (cadre-nodes(7)).
    # TB_REMOTE=tcp runs the same jobs over cadre's tcp (the scenario's own
    # check, where cadre has no UCX). Skipped (77) where cadre-info says ucx
    # is not built or not usable.
    remote=${TB_REMOTE:-ucx}
    [[ $remote == ucx ]] && tb_need_ucx "$B"
    tb_init 3
    export CADRE_TRANSPORT=shm,$remote TB_CHECK_REMOTE=$remote TB_LOST_WITHIN=15
    [[ $remote == ucx ]] && export UCX_TLS=tcp
    coll mpirun 2 2 block
    coll mpirun 3 2 cyclic
    p2p_mixed mpirun 2 2 cyclic
    p2p_mixed mpirun 3 2 block
    tb_slurm_up
    [[ $remote == ucx ]] && export UCX_NET_DEVICES=eth0
    coll srun 2 2 cyclic
    coll srun 3 2 block
    p2p_mixed srun 2 2 block
    p2p_mixed srun 3 2 cyclic
    lost kill srun
    lost cut mpirun
    ;;
hold)
    # For stale: makes one host, says so in file $2, and waits to be killed.
    tb_init 1
    echo ready >"$2"
    sleep 600
    ;;
init-only)
    tb_init 1
    ;;
stale)
    # A run killed by SIGKILL (no trap) leaves its slot; the next run's
    # claim cleans it while it holds the lock, and must not wait for that
    # lock again (it did, forever: make check's first hosts scenario hung).
    ready=$(mktemp /tmp/cadre-testbed-ready.XXXXXX)
    : >"$ready"
    setsid "$0" hold "$ready" &
    holder=$!
    for ((i = 0; i < 600; i++)); do
        [[ -s $ready ]] && break
        sleep 0.1
    done
    if [[ ! -s $ready ]]; then
        kill -KILL -- "-$holder" 2>/dev/null
        rm -f "$ready"
        printf 'hosts: stale slot: FAILED, the holder did not make its host in 60 s\n'
        exit 1
    fi
    kill -KILL -- "-$holder"
    wait "$holder" 2>/dev/null
    rm -f "$ready"
    t0=$EPOCHREALTIME
    if timeout 120 "$0" init-only 2>"${TMPDIR:-/tmp}/cadre-testbed-stale.$$"; then
        secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
        if grep -q 'is gone; cleaning' "${TMPDIR:-/tmp}/cadre-testbed-stale.$$"; then
            printf 'hosts: stale slot: ok, a dead run'"'"'s slot cleaned and a new one made in %s s\n' "$secs"
        else
            printf 'hosts: stale slot: FAILED, the next run did not meet the dead run'"'"'s slot\n'
            FAILED=1
        fi
    else
        printf 'hosts: stale slot: FAILED, the next run did not finish its set-up in 120 s\n'
        FAILED=1
    fi
    rm -f "${TMPDIR:-/tmp}/cadre-testbed-stale.$$"
    ;;
*)
    echo "usage: $0 clean|mpirun-coll|srun-coll|mpirun-p2p|srun-p2p|rdv|ifaces|lost-kill|lost-cut|ucx|stale" >&2
    exit 2
    ;;
esac
exit "$FAILED"
