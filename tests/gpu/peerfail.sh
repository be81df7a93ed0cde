#!/bin/bash
# peerfail.sh CADRERUN PROGRAM [CADRERUN-OPTIONS...]: runs gpu_peerfail on 4
# ranks of one GPU under --keep-going (rank 2 kills itself) and passes when
# every survivor (ranks 0, 1 and 3) printed its "ok" line. Used by
# gpu-tests.sh (make check) and device-run.sh.
run=${1:?cadrerun}
prog=${2:?gpu_peerfail}
shift 2
out=$(CADRE_TIMEOUT=30 timeout -k 5 100 "$run" --keep-going -n 4 --ranks-per-gpu 4 "$@" "$prog" 2>&1)
rc=$?
printf '%s\n' "$out"
case $out in *"skipped: no GPU"*) exit 77 ;; esac
for r in 0 1 3; do
    if ! printf '%s\n' "$out" | grep -q "gpu_peerfail: rank $r ok"; then
        echo "peerfail: rank $r did not pass (cadrerun exit status $rc)"
        exit 1
    fi
done
echo "peerfail: ranks 0, 1 and 3 passed (cadrerun exit status $rc)"
