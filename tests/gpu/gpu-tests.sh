#!/bin/sh
# The GPU tests (tests/gpu): the reduction kernels alone, then the device-buffer
# programs under cadrerun with 1, 2 and 4 ranks sharing one GPU. Exit 77 (SKIP
# for the automake driver) where CUDA is not built in or no GPU is present:
# skipped, never passed.
B=${CADRE_BUILDDIR:-$(pwd)/..}
kt=$B/tests/gpu/kernel_test
ct=$B/tests/gpu/coll_gpu_test
it=$B/tests/gpu/ipc_gpu_test
run=$B/launcher/cadrerun
if [ ! -x "$kt" ] || [ ! -x "$ct" ] || [ ! -x "$it" ]; then
    echo "skipped: no GPU (libcadre built without CUDA)"
    exit 77
fi
"$kt"
rc=$?
[ $rc -eq 0 ] || exit $rc # 77 from kernel_test: "skipped: no GPU"
fail=0
go() {
    echo "== $*"
    if ! timeout 300 env "$@"; then
        echo "FAILED: $*"
        fail=1
    fi
}
# go_log PATTERN ENV... PROGRAM: as go, and the DEVICE log must show PATTERN
# (the path the run is meant to take was taken).
go_log() {
    pat=$1
    shift
    echo "== $* (log: $pat)"
    out=$(timeout 300 env CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=DEVICE "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -v ': device buffers to rank\|bound CUDA device' | tail -n 40
    if [ $rc -ne 0 ]; then
        echo "FAILED: $*"
        fail=1
    elif ! printf '%s\n' "$out" | grep -q "$pat"; then
        echo "FAILED: $* (no '$pat' in the log)"
        fail=1
    fi
}
go "$run" -n 1 "$ct"
go "$run" -n 2 --ranks-per-gpu 2 "$ct"
go "$run" -n 4 --ranks-per-gpu 4 "$ct"
go_log "still has 1 device operations pending" GPU_TESTS=freestuck CADRE_TIMEOUT=3 "$run" -n 1 "$ct"
go CADRE_GPU_WAIT=kernel "$run" -n 2 --ranks-per-gpu 2 "$ct"
go CADRE_TRANSPORT=tcp "$run" -n 2 --ranks-per-gpu 2 "$ct"
# The direct collectives (one kernel per GPU over every rank's buffers) and
# CUDA IPC point-to-point, and the staged path forced, against the host path
# (coll_gpu_test) and against references computed in the program
# (ipc_gpu_test); then with every stream sharing one hardware queue.
go CADRE_GPU_ALGO=staged "$run" -n 2 --ranks-per-gpu 2 "$ct"
go "$run" -n 3 --ranks-per-gpu 3 "$ct"
go "$run" -n 1 "$it"
go_log "CUDA IPC" "$run" -n 2 --ranks-per-gpu 2 "$it"
go_log "direct device collectives on 4 ranks" "$run" -n 4 --ranks-per-gpu 4 "$it"
go_log "direct device collectives on 3 ranks" "$run" -n 3 --ranks-per-gpu 3 "$it"
go CADRE_GPU_ALGO=staged CADRE_GPU_IPC=0 "$run" -n 4 --ranks-per-gpu 4 "$it"
go CADRE_TRANSPORT=tcp "$run" -n 2 --ranks-per-gpu 2 "$it"
go CUDA_DEVICE_MAX_CONNECTIONS=1 "$run" -n 4 --ranks-per-gpu 4 "$it"
go CUDA_DEVICE_MAX_CONNECTIONS=1 "$run" -n 2 --ranks-per-gpu 2 "$ct"
# A rank killed while the others' streams wait for it.
go sh "$(dirname "$0")/peerfail.sh" "$run" "$B/tests/gpu/gpu_peerfail"
exit $fail
