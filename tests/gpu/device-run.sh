#!/bin/bash
# device-run.sh: everything to run on the GPU machine, in one command, from
# the repository root, with the bundle that tests/gpu/device-bundle.sh made
# here carried along (tests/gpu/README.md has the exact call):
#
#   bash tests/gpu/device-run.sh gpu-bundle/dist
#   bash tests/gpu/device-run.sh --dry-run gpu-bundle/dist     (anywhere: see below)
#   bash tests/gpu/device-run.sh --figures OUTDIR   (the figures of an earlier run's logs)
#
# In order: the environment (nvidia-smi, driver and CUDA versions, the
# commit and the bundle's), the reduction kernels (kernel_test), the
# device-to-device copy bandwidth (copy_bw), the tests/gpu programs at 1 and
# 2 ranks on the one GPU, cadre-perf -G float32 allreduce 8 B - 256 MiB at 4
# ranks (timed, then checked), ipc_gpu_test at 3 and 4 ranks, a rank killed in a
# device collective (peerfail.sh), coll_gpu_test at 3 and 4 ranks, coll_gpu_test
# and ipc_gpu_test at 4 ranks on two fake hosts over the ucx transport
# (ucx-hosts.sh; where the bundle has no UCX they fail: cadre_init cannot start
# the forced transport), ipc_gpu_test
# with every stream on one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1)
# and at 8 ranks, the 4-rank sweep again under an MPS daemon of its own
# (with-mps.sh), the 1-rank sweep against the torch/NCCL references
# (torch_ref.py), the staged path at 4 ranks, and coll_gpu_test at 8 ranks.
# Each step runs under its own `timeout` and
# ends with one line: its name, its verdict (ok; HANG, for rc 124 or 137: it
# was killed at its limit; FAILED rc=N; SKIP and why), its exit status and
# wall time. cadrerun's own --timeout fires 5 s before the step's, so a hang
# under cadrerun prints every rank's operation first. The steps share a
# budget (DEVICE_RUN_BUDGET, default 530 s, so that the whole run ends within
# 9 minutes): each step's limit is cut to what is left, and steps for which
# less than 5 s is left are skipped. A program that hung at fewer ranks gets
# 20 s at more. Everything goes to stdout and to ${OUT:-/tmp/out}:
# device-run.log (all of it), summary.txt (one line per step, then the
# figures against the goals) and steps/NN-name.log (each step's output).
# Exit status: 0 when no step failed or hung, 1 otherwise, 2 on a usage error.
#
# --dry-run: for make check (the gpubundle suite) and for trying the script
# without a GPU: the GPU steps skip with a line saying so when no GPU is
# there (as they would anyway), and three self-test steps run first: a host
# allreduce under the bundled cadrerun (ok), a command that outlives its
# limit (HANG, rc 124) and cadre-perf -G (a clear error without a GPU; FAILED
# is the expected verdict without a GPU). The budget then defaults to 120 s.
set -u

usage() { sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; }

dry=0
bundle=
figures_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --dry-run) dry=1 ;;
    --figures) figures_only=1; O=${2:?--figures needs the output folder of a run}; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "device-run: unknown option '$1'" >&2; exit 2 ;;
    *) [ -z "$bundle" ] || { echo "device-run: one bundle only" >&2; exit 2; }; bundle=$1 ;;
    esac
    shift
done
bundle=${bundle:-gpu-bundle/dist}
if [ $figures_only = 0 ] && [ ! -f "$bundle/env.sh" ]; then
    echo "device-run: $bundle/env.sh: no bundle there (make it with tests/gpu/device-bundle.sh and carry gpu-bundle/dist)" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
budget=${DEVICE_RUN_BUDGET:-$([ $dry = 1 ] && echo 120 || echo 530)}
if [ $figures_only = 0 ]; then
    B=$(cd "$bundle" && pwd)
    O=${OUT:-/tmp/out}
    mkdir -p "$O/steps" || { echo "device-run: cannot write $O" >&2; exit 2; }
    : > "$O/summary.txt"
    # shellcheck source=/dev/null
    . "$B/env.sh"
    # Should the trip have lost the execute bits: the programs get them back.
    for f in "$B"/bin/* "$B"/tests/gpu/*; do
        if [ -f "$f" ] && [ ! -x "$f" ]; then
            chmod u+x "$f" && echo "device-run: NOTE: $f was not executable: chmod u+x"
        fi
    done
fi

now_ms() { date +%s%3N; }
first() { # the first of its arguments that exists
    local f
    for f in "$@"; do [ -e "$f" ] && { echo "$f"; return 0; }; done
    return 0
}
T_START=$(now_ms)
left_s() { echo $(( budget - ($(now_ms) - T_START) / 1000 )); }

have_gpu=0
if [ $figures_only = 0 ] && command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    have_gpu=1
fi

nstep=0
failed=0
declare -A hung=()

# step NAME LIMIT NEED CMD...: one step. NEED: gpu (skipped without a GPU)
# or any, optionally with :hang or :fail, the outcome a self-test expects
# (that outcome is then no failure, and any other is). CMD may hold @T@,
# replaced by the limit less 5 s (cadrerun --timeout). A word of CMD inside
# the bundle that is not there skips the step; one under tests/gpu names the
# program whose hang at fewer ranks gives it 20 s.
step() {
    local name=$1 limit=$2 need=${3%%:*} expect=ok
    case $3 in *:*) expect=${3#*:} ;; esac
    shift 3
    nstep=$((nstep + 1))
    local id
    id=$(printf '%02d' $nstep)
    local log="$O/steps/$id-$name.log" verdict rc=- wall=0 outcome=skip
    local key='' missing='' w prog=
    for w in "$@"; do
        case $w in "$B"/*) [ -x "$w" ] || missing=${w#"$B"/} ;; esac
        case $w in "$B"/tests/gpu/*) key=$(basename "$w") ;; esac
        case $w in "$B"/tests/gpu/* | "$B"/bin/cadre-perf) prog=$(basename "$w") ;; esac
    done
    local left
    left=$(left_s)
    if [ "$need" = gpu ] && [ $have_gpu = 0 ]; then
        verdict="SKIP (no GPU: nvidia-smi lists none)"
    elif [ -n "$missing" ]; then
        verdict="SKIP (not in the bundle: $missing)"
    elif [ "$left" -lt 10 ]; then
        verdict="SKIP (no time left: ${left} s of the ${budget} s budget)"
    else
        [ -n "$key" ] && [ -n "${hung[$key]:-}" ] && [ "$limit" -gt 20 ] && limit=20
        [ "$limit" -gt $((left - 5)) ] && limit=$((left - 5))
        local inner=$((limit - 5))
        [ $inner -lt 1 ] && inner=1
        local cmd=() a
        for a in "$@"; do cmd+=("${a//@T@/$inner}"); done
        echo "=== [$id] $name (limit ${limit} s): ${cmd[*]//"$B"\//}"
        local t0
        t0=$(now_ms)
        # To a file, not through a pipe: a process the command leaves behind
        # cannot hold the step open.
        timeout -k 5 "$limit" "${cmd[@]}" > "$log" 2>&1 < /dev/null &
        local tpid=$!
        # A step still running 12 s before its limit (cadrerun's own
        # timeout fires 5 s before it) is likely hung: the stacks of its
        # test program's ranks (at most 4, cuda-gdb: the GPU machine has no
        # gdb) go to the step's .stacks file, printed below.
        local waited=0
        while kill -0 $tpid 2>/dev/null && [ $waited -lt $((limit - 12)) ]; do
            sleep 1
            waited=$((waited + 1))
        done
        if kill -0 $tpid 2>/dev/null && [ $dry = 0 ] && command -v cuda-gdb >/dev/null; then
            local p
            # -x on the name the kernel keeps (15 characters): the ranks, not
            # timeout or cadrerun, whose command lines name the program too
            for p in $([ -n "$prog" ] && pgrep -x "${prog:0:15}" | head -4); do
                echo "=== stacks of pid $p ($(tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep '^CADRE_RANK=' | head -1))"
                timeout 5 cuda-gdb -batch -p "$p" -ex 'thread apply all bt 12' 2>&1 \
                    | grep -E '^(#|Thread)' | grep -v 'libcudadebugger' | head -60
            done > "$log.stacks"
        fi
        wait $tpid
        rc=$?
        wall=$(( $(now_ms) - t0 ))
        cat "$log"
        [ -s "$log.stacks" ] && cat "$log.stacks"
        case $rc in
        0) verdict=ok outcome=ok ;;
        77) if [ $have_gpu = 1 ]; then # nvidia-smi lists one: the program should see it
                verdict="FAILED (the program found no GPU)" outcome=fail
            else
                verdict="SKIP (the program found no GPU)"
            fi ;;
        124|137) verdict="HANG (killed at its ${limit} s limit)" outcome=hang
            [ -n "$key" ] && hung[$key]=1 ;;
        *) verdict="FAILED" outcome=fail ;;
        esac
        if [ "$expect" != ok ]; then
            if [ "$outcome" = "$expect" ]; then
                verdict="$verdict, as expected"
            else
                verdict="$verdict, NOT the expected $expect"
                outcome=fail
            fi
        fi
        case $outcome in hang|fail) [ "$expect" = "$outcome" ] || failed=1 ;; esac
    fi
    local line
    line=$(printf '[%s] %-24s %-36s rc=%-3s wall %6.1f s' "$id" "$name" "$verdict" "$rc" \
        "$(awk -v m="$wall" 'BEGIN { printf "%.1f", m / 1000 }')")
    echo "--- $line"
    echo "$line" >> "$O/summary.txt"
}

R=cadrerun
crun() { # crun N ARGS...: a job of N ranks sharing the one GPU
    local n=$1
    shift
    echo "$R" -n "$n" --ranks-per-gpu "$n" --tag-output --timeout @T@ "$@"
}

# The crun lines split on purpose: a command and its arguments.
# shellcheck disable=SC2046
main() {
    echo "=== device-run: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), budget ${budget} s$([ $dry = 1 ] && echo ', dry run')"
    echo "--- environment"
    uname -srm
    echo "cpus: $(nproc); memory: $(free -g 2>/dev/null | awk '/^Mem:/ { print $2 " GiB" }')"
    if git rev-parse HEAD >/dev/null 2>&1; then
        echo "checkout: $(git rev-parse HEAD) $(git log -1 --format='%cd %s' --date=short | cut -c1-100)"
        git status --porcelain --untracked-files=no | head -5
    fi
    echo "bundle: $B"
    sed -n '1,5p' "$B/MANIFEST" 2>/dev/null | sed 's/^/  /'
    local bc head
    bc=$(sed -n 's/^commit: \([0-9a-f]*\).*/\1/p' "$B/MANIFEST" 2>/dev/null)
    head=$(git rev-parse HEAD 2>/dev/null)
    if [ -n "$bc" ] && [ -n "$head" ] && [ "$bc" != "$head" ]; then
        echo "NOTE: the bundle was built from $bc, not from this checkout's HEAD"
    fi
    if [ $have_gpu = 1 ]; then
        timeout 20 nvidia-smi
        timeout 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_mode,mig.mode.current,clocks.max.memory,power.limit --format=csv
        local dcuda rt
        dcuda=$(timeout 20 nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p')
        rt=$(first "$B"/lib/libcudart.so.* | sed 's/.*libcudart.so.//')
        echo "driver supports CUDA: ${dcuda:-?} (the bundle's runtime: CUDA ${rt:-?}; CUDA 13 needs driver >= 580)"
        if [ -n "$dcuda" ] && [ -n "$rt" ] && [ "${dcuda%%.*}" -lt "$rt" ]; then
            echo "WARNING: this driver supports CUDA $dcuda only: the bundle's CUDA $rt programs will fail every CUDA call (insufficient driver); build the bundle with an older toolkit"
        fi
    else
        echo "no GPU: nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'lists none' || echo 'is not installed'); the GPU steps skip"
    fi
    # cadrerun counts the GPUs in /proc/driver/nvidia/gpus; a container may
    # not show it: then the count nvidia-smi gives is forced.
    local nproc_gpus nsmi
    nproc_gpus=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    nsmi=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    echo "GPUs: $nsmi listed by nvidia-smi, $nproc_gpus in /proc/driver/nvidia/gpus"
    if [ "$nsmi" -gt 0 ] && [ "$nproc_gpus" = 0 ] && [ -z "${CADRE_LAUNCHER_NGPUS:-}" ]; then
        export CADRE_LAUNCHER_NGPUS=$nsmi
        echo "NOTE: cadrerun cannot count them here: CADRE_LAUNCHER_NGPUS=$nsmi"
    fi
    echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}; MPS: $(command -v nvidia-cuda-mps-control >/dev/null && echo 'control present' || echo 'no control'), $(pgrep -x nvidia-cuda-mps >/dev/null 2>&1 && echo 'server running' || echo 'no server running')"
    echo "CUDA toolkits: $(for d in /usr/local/cuda*; do [ -e "$d" ] && printf '%s ' "$d"; done)"
    local miss
    miss=$(for f in "$B"/bin/* "$B"/tests/gpu/* "$B"/lib/*.so*; do [ -f "$f" ] && ldd "$f" 2>/dev/null | grep 'not found' | sed "s|^|${f#"$B"/}: |"; done | sort -u)
    if [ -n "$miss" ]; then echo "libraries not found:"; echo "$miss"; else echo "libraries: every one of the bundle's programs resolves"; fi
    echo

    local T="$B/tests/gpu" P="$B/bin/cadre-perf"
    local SWEEP=(allreduce -G -d float32 -b 8 -e 256M -f 2 -c 0 -T 0.05 -w 3)
    if [ $dry = 1 ]; then
        # shellcheck disable=SC2046
        step selftest-host-allreduce 60 any $(crun 2) "$P" allreduce -b 8 -e 64K -f 8 -n 5 -w 1
        step selftest-hang 3 any:hang sleep 60
        # shellcheck disable=SC2046
        step selftest-perf-G 30 "any:$([ $have_gpu = 1 ] && echo ok || echo fail)" \
            $(crun 1) "$P" allreduce -G -b 8 -e 8 -n 1 -w 0
    fi
    step kernel_test 60 gpu "$T/kernel_test"
    step copy_bw 30 gpu "$T/copy_bw" 256 20
    local n
    for n in 1 2; do
        step "ipc_gpu_test-$n" 60 gpu env CADRE_TIMEOUT=30 $(crun $n) "$T/ipc_gpu_test"
        step "coll_gpu_test-$n" 60 gpu env CADRE_TIMEOUT=30 $(crun $n) "$T/coll_gpu_test"
    done
    # cadre_comm_free with a device send stuck behind a held stream: returns
    # after CADRE_TIMEOUT with a warning naming the send (it hung before)
    step coll_gpu_test-freestuck 30 gpu env GPU_TESTS=freestuck CADRE_TIMEOUT=3 $(crun 1) \
        "$T/coll_gpu_test"
    step perf-G-allreduce-4 90 gpu $(crun 4) "$P" "${SWEEP[@]}"
    # the same sizes up to 4 MiB with every rank's stream marking each call
    # (no hand-over from the host): the change of CADRE_GPU_HOST_DONE, same run
    step perf-G-allreduce-4-hostdone0 40 gpu env CADRE_GPU_HOST_DONE=0 $(crun 4) "$P" \
        allreduce -G -d float32 -b 8 -e 4M -f 4 -c 0 -T 0.05 -w 3
    step perf-G-allreduce-4-check 60 gpu $(crun 4) "$P" allreduce -G -d float32 -b 8 -e 64M -f 8 -n 2 -w 1 -c 1
    step ipc_gpu_test-3 60 gpu env CADRE_TIMEOUT=30 $(crun 3) "$T/ipc_gpu_test"
    step ipc_gpu_test-4 60 gpu env CADRE_TIMEOUT=30 $(crun 4) "$T/ipc_gpu_test"
    step gpu_peerfail-4 60 gpu bash "$here/peerfail.sh" "$R" "$T/gpu_peerfail" --tag-output
    step coll_gpu_test-3 60 gpu env CADRE_TIMEOUT=30 $(crun 3) "$T/coll_gpu_test"
    step coll_gpu_test-4 60 gpu env CADRE_TIMEOUT=30 $(crun 4) "$T/coll_gpu_test"
    # device buffers between two fake hosts over the ucx transport (bundled
    # UCX, its tcp on lo): staged through host memory, shm within a host
    step ucx-coll_gpu_test-4 60 gpu bash "$here/ucx-hosts.sh" "$R" "$T/coll_gpu_test" 4
    step ucx-ipc_gpu_test-4 60 gpu bash "$here/ucx-hosts.sh" "$R" "$T/ipc_gpu_test" 4
    step maxconn1-ipc-4 60 gpu env CUDA_DEVICE_MAX_CONNECTIONS=1 CADRE_TIMEOUT=30 $(crun 4) "$T/ipc_gpu_test"
    step maxconn1-coll-2 60 gpu env CUDA_DEVICE_MAX_CONNECTIONS=1 CADRE_TIMEOUT=30 $(crun 2) "$T/coll_gpu_test"
    step ipc_gpu_test-8 60 gpu env CADRE_TIMEOUT=30 $(crun 8) "$T/ipc_gpu_test"
    step perf-G-allreduce-4-mps 90 gpu bash "$here/with-mps.sh" $(crun 4) "$P" "${SWEEP[@]}"
    step perf-G-allreduce-1 40 gpu $(crun 1) "$P" "${SWEEP[@]}"
    step torch-nccl-1 60 gpu python3 "$here/torch_ref.py"
    step perf-G-staged-4 60 gpu env CADRE_GPU_ALGO=staged $(crun 4) "$P" allreduce -G -d float32 -b 8K -e 64M -f 8 -c 0 -T 0.05 -w 2
    step coll_gpu_test-8 60 gpu env CADRE_TIMEOUT=30 $(crun 8) "$T/coll_gpu_test"

    echo
    echo "=== summary (also in $O/summary.txt)"
    {
        echo "--- against the goals (bench/RESULTS.md records them with device, date, commit)"
        figures
    } >> "$O/summary.txt"
    cat "$O/summary.txt"
    echo "device-run: $(( ($(now_ms) - T_START) / 1000 )) s in all; $nstep steps; $([ $failed = 0 ] && echo 'none failed or hung' || echo 'some FAILED or HUNG')"
    return $failed
}

# The figures of the goals, from the steps' logs in $O/steps: the copy
# bandwidth, the 4-rank 256 MiB and 8 KiB allreduce times (out of place, in
# place) against the floor and the goals, cadre's 1-rank allreduce beside
# NCCL's (out of place: a copy) and torch's copy. cadrerun's "[rank] "
# prefixes are dropped first. Also alone: device-run.sh --figures OUTDIR.
figures() {
    local s="$O/steps"
    local traffic
    traffic=$(sed -n 's/^copy_bw: memory traffic at [0-9]* MiB: \([0-9.]*\) GB.*/\1/p' "$s"/*-copy_bw.log 2>/dev/null | head -1)
    echo "copy_bw memory traffic (read + write): ${traffic:-none} GB/s"
    local f
    # shellcheck disable=SC2016
    local perf_awk='{ sub(/^\[[0-9]+\] /, "") }
        !/^#/ && ($1 == 8192 || $1 == 268435456) && NF >= 13 {
            printf "cadre %s allreduce %9d B: out of place %s us, in place %s us", who, $1, $6, $10
            if ($1 == 8192 && who ~ /^4/) printf " (goal: under 15 us)"
            if ($1 == 268435456 && who ~ /^4/ && tr > 0) {
                fl = 2 * 4 * $1 / (tr * 1e9) * 1e6
                printf " (floor %.0f us, goal under %.0f us; %.2f and %.2f of the floor speed, goal 0.7)", fl, fl / 0.7, fl / $6, fl / $10
            }
            printf "\n"
        }'
    f=$(first "$s"/*-perf-G-allreduce-4.log)
    [ -n "$f" ] && awk -v tr="${traffic:-0}" -v who="4 ranks" "$perf_awk" "$f"
    f=$(first "$s"/*-perf-G-allreduce-4-hostdone0.log)
    [ -n "$f" ] && awk -v tr="${traffic:-0}" -v who="4 ranks, CADRE_GPU_HOST_DONE=0" "$perf_awk" "$f"
    f=$(first "$s"/*-perf-G-allreduce-4-mps.log)
    [ -n "$f" ] && awk -v tr="${traffic:-0}" -v who="4 ranks under MPS" "$perf_awk" "$f"
    f=$(first "$s"/*-perf-G-allreduce-1.log)
    [ -n "$f" ] && awk -v tr="${traffic:-0}" -v who="1 rank " "$perf_awk" "$f"
    f=$(first "$s"/*-torch-nccl-1.log)
    if [ -n "$f" ]; then
        awk '/^# NCCL .*out of place/ { sec = "NCCL out of place"; next }
             /^# NCCL .*in place/ { sec = "NCCL in place"; next }
             /^# torch.distributed/ { sec = "torch.distributed in place"; next }
             /^#/ { next }
             sec != "" && ($1 == 8192 || $1 == 268435456) {
                 printf "%s, 1 rank, allreduce %9d B: %s us\n", sec, $1, $6 }' "$f"
        grep -h '^torch_ref: torch D2D' "$f"
    fi
    return 0
}

if [ "$figures_only" = 1 ]; then
    figures
    exit 0
fi

set -o pipefail
main 2>&1 | tee "$O/device-run.log"
rc=${PIPESTATUS[0]}
exit "$rc"
