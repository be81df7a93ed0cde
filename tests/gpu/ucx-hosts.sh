#!/bin/bash
# ucx-hosts.sh CADRERUN PROGRAM N [CADRERUN-OPTIONS...]: runs a tests/gpu
# program on N ranks of one GPU split into two fake hosts (CADRE_HOSTID, block
# placement: ranks 0..N/2-1 on h0, the rest on h1) with CADRE_TRANSPORT=shm,ucx
# and UCX's tcp on lo, so that the device buffers between the two "hosts" go
# through the ucx transport (staged through host memory: Debian's UCX, the
# bundle's, takes no CUDA memory) and those within a host through shm. Passes
# when the program passes and every rank logged ucx for each peer on the other
# host, shm for each on its own, and the staging line of the ucx transport.
# Exit 77 when the program found no GPU. Used by device-run.sh.
# With a UCX built with CUDA (CADRE_UCX_LIB pointing to its libucp):
# UCX_HOSTS_DEVICE=direct expects the direct line instead, and
# UCX_HOSTS_TLS sets UCX_TLS (default tcp; tcp,cuda_copy lets UCX move CUDA
# memory over its tcp, tests/gpu/README.md).
run=${1:?cadrerun}
prog=${2:?program}
n=${3:?ranks}
shift 3
half=$(( (n + 1) / 2 ))
case ${UCX_HOSTS_DEVICE:-staged} in
    direct) line="ucx: device buffers go to UCX directly" ;;
    *) line="ucx: device buffers staged through host memory" ;;
esac
out=$(CADRE_TRANSPORT=shm,ucx UCX_TLS=${UCX_HOSTS_TLS:-tcp} UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n \
      CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P CADRE_TIMEOUT=30 \
      timeout -k 5 100 "$run" -n "$n" --ranks-per-gpu "$n" "$@" \
      sh -c "CADRE_HOSTID=h\$((CADRE_RANK / $half)) exec \"$prog\"" 2>&1)
rc=$?
printf '%s\n' "$out"
case $out in *"skipped: no GPU"*) exit 77 ;; esac
bad=0
for ((w = 0; w < n; w++)); do
    for ((v = 0; v < n; v++)); do
        [ $v = $w ] && continue
        want=shm
        [ $((w / half)) != $((v / half)) ] && want=ucx
        if ! printf '%s\n' "$out" | grep -qF "[rank $w INFO P2P] peer $v: $want"; then
            echo "ucx-hosts: rank $w did not log '$want' for peer $v"
            bad=1
        fi
    done
    if ! printf '%s\n' "$out" | grep -qF "[rank $w INFO P2P] $line"; then
        echo "ucx-hosts: rank $w did not log '$line'"
        bad=1
    fi
done
if [ $rc != 0 ] || [ $bad != 0 ]; then
    echo "ucx-hosts: FAILED (exit status $rc)"
    exit 1
fi
echo "ucx-hosts: $(basename "$prog") passed on $n ranks, 2 fake hosts, ucx between them"
