#!/bin/sh
# The GPU tests (tests/gpu): the reduction kernels alone, then the device-buffer
# programs under cadrerun with 1, 2 and 4 ranks sharing one GPU. Exit 77 (SKIP
# for the automake driver) where CUDA is not built in or no GPU is present:
# skipped, never passed.
B=${CADRE_BUILDDIR:-$(pwd)/..}
kt=$B/tests/gpu/kernel_test
ct=$B/tests/gpu/coll_gpu_test
run=$B/launcher/cadrerun
if [ ! -x "$kt" ] || [ ! -x "$ct" ]; then
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
go "$run" -n 1 "$ct"
go "$run" -n 2 --ranks-per-gpu 2 "$ct"
go "$run" -n 4 --ranks-per-gpu 4 "$ct"
go CADRE_GPU_WAIT=kernel "$run" -n 2 --ranks-per-gpu 2 "$ct"
go CADRE_TRANSPORT=tcp "$run" -n 2 --ranks-per-gpu 2 "$ct"
exit $fail
