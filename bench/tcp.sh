#!/usr/bin/env bash
# cadre's TCP transport over loopback against a plain socket ping-pong of the
# same sizes (bench/tcp_pingpong.c: blocking, and busy-polling with -p), on
# 2 ranks, in many alternated turns. This machine has episodes of a few
# seconds in which every program's large socket copies run 2-4x slower (the
# plain sockets too); a turn of each program falls in the same seconds, and
# the medians over many turns say what one run cannot. Then bench/tcp_alternate
# runs cadre's ping-pong and the plain-socket ones between the same two
# processes in blocks of a few milliseconds, alternated: those compare in the
# same milliseconds, round by round, whatever episode they fall in.
# Environment: TURNS (15), MIN (8), MAX (4194304), ROUNDS (21) and ALT_MAX (64 MiB,
# the largest ping-pong of the tests) for tcp_alternate.
# Usage: TURNS=15 bench/tcp.sh [builddir]   (run from the source tree after make)
# Prints a markdown table; bench/RESULTS.md keeps the figures.
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
cc -O2 -o "$tmp/tcp_pingpong" "$here/tcp_pingpong.c"
make -s -C "$build/tests" bench/tcp_alternate >/dev/null
turns=${TURNS:-15}
min=${MIN:-8}
max=${MAX:-4194304}

echo "## TCP over loopback on $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)"
: > "$tmp/c2c.log"
for ((i = 0; i < turns; i++)); do
    "$tmp/c2c" | awk '{ print $2 }' >> "$tmp/c2c.log"
    CADRE_TRANSPORT=tcp "$cadrerun" -n 2 --bind-to core "$perf" sendrecv -b "$min" -e "$max" -f 2 -c 0 |
        awk -v t="$i" '!/^#/ { print t, $1, $6 }' >> "$tmp/cadre"
    "$tmp/tcp_pingpong" -b "$min" -m "$max" -t 0.05 |
        awk -v t="$i" '!/^#/ && NF >= 4 && $1 + 0 > 0 { print t, $1, $3 }' >> "$tmp/block"
    "$tmp/tcp_pingpong" -p -b "$min" -m "$max" -t 0.05 |
        awk -v t="$i" '!/^#/ && NF >= 4 && $1 + 0 > 0 { print t, $1, $3 }' >> "$tmp/spin"
done
echo
echo "$turns turns; core-to-core round trip (bench/c2c) before each: $(tr '\n' ' ' < "$tmp/c2c.log")ns"
echo
echo "One-way latency, us: the median over the turns; \"within 10%\" counts the turns in which"
echo "cadre took at most 1.1x the blocking socket ping-pong's time of the same turn."
echo
echo "| size (B) | cadre tcp | socket, blocking | socket, busy-polling | cadre / blocking | turns within 10% |"
echo "|---:|---:|---:|---:|---:|---:|"
# Columns joined on (turn, size); the medians and counts per size.
awk '
    FILENAME ~ /cadre$/ { c[$1, $2] = $3; sizes[$2] = 1; next }
    FILENAME ~ /block$/ { b[$1, $2] = $3; next }
    { s[$1, $2] = $3 }
    function med(arr, size,    n, v, i, t) {
        n = 0
        for (t = 0; t < turns; t++) if ((t, size) in arr) v[++n] = arr[t, size] + 0
        if (!n) return "-"
        asort(v)
        return v[int((n + 1) / 2)]
    }
    END {
        for (size in sizes) order[++k] = size + 0
        asort(order)
        for (i = 1; i <= k; i++) {
            size = order[i]; ok = 0; n = 0
            for (t = 0; t < turns; t++)
                if ((t, size) in c && (t, size) in b) { n++; if (c[t, size] <= 1.1 * b[t, size]) ok++ }
            mc = med(c, size); mb = med(b, size); ms = med(s, size)
            printf "| %d | %.2f | %.2f | %.2f | %.2f | %d of %d |\n", size, mc, mb, ms, mc / mb, ok, n
        }
    }' turns="$turns" "$tmp/cadre" "$tmp/block" "$tmp/spin"

echo
echo "### The same ping-pongs alternated in one job: bench/tcp_alternate"
echo
echo "\`CADRE_TRANSPORT=tcp cadrerun -n 2 --bind-to core tests/bench/tcp_alternate -r ${ROUNDS:-21} -b $min -m ${ALT_MAX:-67108864}\`"
echo "(c2c before: $("$tmp/c2c" | awk '{ print $2 }') ns)"
echo
CADRE_TRANSPORT=tcp "$cadrerun" -n 2 --bind-to core "$build/tests/bench/tcp_alternate" \
    -r "${ROUNDS:-21}" -b "$min" -m "${ALT_MAX:-67108864}"
