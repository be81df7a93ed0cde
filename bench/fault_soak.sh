#!/usr/bin/env bash
# bench/fault_soak.sh: the fault-injection soak. Runs tests/ranks/fault_soak
# (a loop of mixed point-to-point and collective calls, every result checked)
# RUNS times under cadrerun with one rank failing on purpose: SIGKILL, a
# segmentation fault, abort(), exit 0 or 3 without cadre_finalize, or
# cadre_abort; at a random rank, iteration and step; at 3-5 ranks; over
# shared memory and TCP; with and without --keep-going. Counts the outcomes:
#   ok           the run ended as it must (below)
#   hang         the run did not end within RUN_LIMIT s, or a survivor
#                learned of the failure more than 5 s after it
#                (CADRE_TIMEOUT is 20 s: a wait that only a timeout ends)
#   wrong_blame  a survivor's error is not CADRE_ERR_PEER naming the failed
#                rank (cadre_abort excepted: it ends the job; a send may name
#                a survivor that has finalized since), or cadrerun's report
#                does not name it
#   silent_wrong a call returned success with wrong data
#   bad_exit     cadrerun's exit status is not the failure's: 128+signal,
#                the exit code, cadre_abort's code, non-zero for an exit
#                without cadre_finalize; or under --keep-going a survivor
#                neither detected the failure nor ended its loop
# Every failed run's output is kept in OUTDIR. Bounded: stops after
# MAX_SECONDS (default 1800) even if RUNS are left.
# Usage: [RUNS=200] bench/fault_soak.sh [BUILDDIR]   (env also: SEED, OUTDIR,
#        MAX_SECONDS, RUN_LIMIT, KINDS="kill segv abort exit0 exit3 cadre_abort",
#        TRANSPORTS="shm tcp")
set -uo pipefail
. "$(dirname "$0")/common.sh" "$@"

runs=${RUNS:-200}
seed=${SEED:-$$}
max_seconds=${MAX_SECONDS:-1800}
run_limit=${RUN_LIMIT:-90}
kinds=(${KINDS:-kill segv abort exit0 exit3 cadre_abort})
transports=(${TRANSPORTS:-shm tcp})
prog=$build/tests/ranks/fault_soak
[[ -x $prog ]] || { echo "fault_soak.sh: $prog not built (make check builds it)" >&2; exit 1; }
outdir=${OUTDIR:-/tmp/cadre-fault-soak.$seed}
mkdir -p "$outdir"
RANDOM=$seed
iters=12
declare -A count
start=$SECONDS
echo "# fault_soak: $runs runs, seed $seed, $iters iterations each, failed runs kept in $outdir"
printf '%-4s %-3s %-4s %-11s %-2s %-6s %-4s %7s  %s\n' run n tr kind kg victim it:s secs outcome
done_runs=0
for ((i = 1; i <= runs; i++)); do
    ((SECONDS - start < max_seconds)) || { echo "# stopped after ${max_seconds} s"; break; }
    n=$((3 + RANDOM % 3))
    tr=${transports[RANDOM % ${#transports[@]}]}
    kind=${kinds[RANDOM % ${#kinds[@]}]}
    kg=$((RANDOM % 2))
    victim=$((RANDOM % n))
    fit=$((1 + RANDOM % (iters - 2)))
    step=$((RANDOM % 8))
    dir=$(mktemp -d "$tmp/soak.XXXXXX")
    # A segfault must kill the rank by its signal in a sanitizer build too.
    env=(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0" CADRE_TIMEOUT=20 SOAK_ITERS=$iters SOAK_VICTIM=$victim SOAK_ITER=$fit SOAK_STEP=$step
         SOAK_KIND=$kind SOAK_DIR=$dir)
    [[ $tr == tcp ]] && env+=(CADRE_TRANSPORT=tcp)
    opts=()
    ((kg)) && opts+=(--keep-going)
    t0=$(date +%s.%N)
    env "${env[@]}" timeout -k 5 "$run_limit" "$cadrerun" "${opts[@]}" -n "$n" "$prog" \
        >"$dir/out" 2>"$dir/err" </dev/null
    rc=$?
    secs=$(echo "$(date +%s.%N) - $t0" | bc)
    outcome=ok
    why=""
    # What the exit status must be.
    case $kind in
    kill) want=137 ;;
    segv) want=139 ;;
    abort) want=134 ;;
    exit3) want=3 ;;
    cadre_abort) want=42 ;;
    exit0) want=nonzero ;;
    esac
    detected=$(grep -c 'detected rc=' "$dir/out")
    finished=$(grep -c ' done$' "$dir/out")
    if grep -q 'WRONG' "$dir/out"; then
        outcome=silent_wrong
        why=$(grep -m1 WRONG "$dir/out")
    elif ((rc == 124)) || [[ $(echo "$secs >= $run_limit" | bc) == 1 ]]; then
        outcome=hang
        why="no end within ${run_limit} s"
    elif awk '/detected rc=/ { for (i = 1; i <= NF; i++) if ($i == "after" && $(i+1) + 0 > 5) bad = 1 }
              END { exit !bad }' "$dir/out"; then
        outcome=hang
        why=$(awk '/detected rc=/ { for (i = 1; i <= NF; i++) if ($i == "after" && $(i+1) + 0 > 5) { print; exit } }' "$dir/out")
    elif [[ $kind != cadre_abort ]] &&
        grep 'detected rc=' "$dir/out" | grep -v -E "detected rc=6 .*rank $victim\\b" |
        grep -v -E "detected rc=6 in cadre_send(recv)? .*(has finalized|has called cadre_finalize)" | grep -q .; then
        outcome=wrong_blame
        why=$(grep 'detected rc=' "$dir/out" | grep -v -E "detected rc=6 .*rank $victim\\b" |
              grep -v -E "detected rc=6 in cadre_send(recv)? .*(has finalized|has called cadre_finalize)" | head -1)
    elif ! grep -q -E "^cadrerun:.*rank $victim\\b" "$dir/err"; then
        outcome=wrong_blame
        why="cadrerun's report does not name rank $victim"
    elif [[ $want == nonzero && $rc == 0 || $want != nonzero && $rc != "$want" ]]; then
        outcome=bad_exit
        why="exit $rc, expected $want"
    elif ((kg)) && [[ $kind != cadre_abort ]] && ((detected + finished < n - 1)); then
        outcome=bad_exit
        why="$detected survivors detected the failure and $finished finished, of $((n - 1))"
    fi
    count[$tr.$kg.$kind.runs]=$((${count[$tr.$kg.$kind.runs]:-0} + 1))
    count[$tr.$kg.$kind.$outcome]=$((${count[$tr.$kg.$kind.$outcome]:-0} + 1))
    count[all.$outcome]=$((${count[all.$outcome]:-0} + 1))
    printf '%-4d %-3d %-4s %-11s %-2s %-6d %-4s %7.2f  %s%s\n' "$i" "$n" "$tr" "$kind" \
        "$( ((kg)) && echo kg || echo -)" "$victim" "$fit:$step" "$secs" "$outcome" "${why:+: $why}"
    if [[ $outcome == ok ]]; then
        rm -rf "$dir"
    else
        mv "$dir" "$outdir/run$i.$outcome"
    fi
    done_runs=$i
done
echo
echo "# outcomes by transport, --keep-going (kg) or not, failure kind"
printf '%-4s %-2s %-11s %5s %5s %5s %12s %13s %9s\n' tr kg kind runs ok hang wrong_blame silent_wrong bad_exit
for tr in "${transports[@]}"; do
    for kg in 0 1; do
        for kind in "${kinds[@]}"; do
            k=$tr.$kg.$kind
            [[ -n ${count[$k.runs]:-} ]] || continue
            printf '%-4s %-2s %-11s %5d %5d %5d %12d %13d %9d\n' "$tr" "$( ((kg)) && echo kg || echo -)" \
                "$kind" "${count[$k.runs]}" "${count[$k.ok]:-0}" "${count[$k.hang]:-0}" \
                "${count[$k.wrong_blame]:-0}" "${count[$k.silent_wrong]:-0}" "${count[$k.bad_exit]:-0}"
        done
    done
done
printf '%-19s %5d %5d %5d %12d %13d %9d\n' total "$done_runs" "${count[all.ok]:-0}" \
    "${count[all.hang]:-0}" "${count[all.wrong_blame]:-0}" "${count[all.silent_wrong]:-0}" \
    "${count[all.bad_exit]:-0}"
echo "# ${count[all.ok]:-0} of $done_runs runs ok in $((SECONDS - start)) s (seed $seed)"
if [[ ${count[all.ok]:-0} -eq $done_runs ]]; then
    rmdir "$outdir" 2>/dev/null
    exit 0
fi
echo "# the failed runs' output: $outdir"
exit 1
