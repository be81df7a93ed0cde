#!/bin/bash
# with-mps.sh COMMAND...: runs COMMAND with an MPS control daemon of its own
# (pipe and log folders under ${TMPDIR:-/tmp}), and stops the daemon after,
# whatever COMMAND does. For device-run.sh: the same job with and without MPS
# shows what time slicing between the ranks' contexts costs. Exit status 3
# when no daemon could be started (no nvidia-cuda-mps-control, or it failed).
command -v nvidia-cuda-mps-control >/dev/null 2>&1 || { echo "with-mps: no nvidia-cuda-mps-control"; exit 3; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/cadre-mps.XXXXXX") || exit 3
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
stop() {
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pgrep -f "nvidia-cuda-mps" >/dev/null 2>&1 || break
        sleep 0.5
    done
    sed -n '1,20p' "$CUDA_MPS_LOG_DIRECTORY"/control.log 2>/dev/null | sed 's/^/with-mps: control.log: /'
    rm -rf "$dir"
}
trap stop EXIT
nvidia-cuda-mps-control -d || { echo "with-mps: the daemon did not start"; exit 3; }
echo "with-mps: MPS control daemon started (pipe $CUDA_MPS_PIPE_DIRECTORY)"
"$@"
