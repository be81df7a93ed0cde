#!/bin/sh
# rdv_run.sh N PROG [ARG...]: starts N ranks of PROG the way a shell loop or
# torchrun does, without PMIx: RANK, WORLD_SIZE, MASTER_ADDR (RDV_ADDR, else
# 127.0.0.1) and MASTER_PORT (RDV_PORT, else a free port found by binding
# port 0), then waits for all of them. RDV_SKIP=R leaves rank R out (a rank
# that never comes). Exit status: 0 when every rank exits 0, else the first
# failing rank's status (in rank order).
n=$1
shift
port=${RDV_PORT:-$(/usr/bin/python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')}
pids=""
r=0
while [ "$r" -lt "$n" ]; do
    if [ "$r" != "${RDV_SKIP:--1}" ]; then
        RANK=$r WORLD_SIZE=$n MASTER_ADDR=${RDV_ADDR:-127.0.0.1} MASTER_PORT=$port "$@" &
        pids="$pids $!"
    fi
    r=$((r + 1))
done
rc=0
for p in $pids; do
    wait "$p"
    s=$?
    if [ "$s" -ne 0 ] && [ "$rc" -eq 0 ]; then
        rc=$s
    fi
done
exit $rc
