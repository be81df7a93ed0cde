#!/usr/bin/env bash
# Collectives on this machine, cadre beside Open MPI and MPICH in the same
# run: cadre-perf MODE -c 0 against bench/mpi_coll.c (the same loops, sizes,
# iterations and warm-ups; float32, sum, root 0; time of one call, the largest
# over the ranks), built with Open MPI's mpicc and with MPICH's mpicc.mpich.
#
#   allreduce, allgather, reduce_scatter, bcast on 2 ranks (bound to a core each)
#   allreduce on 4 ranks (oversubscribed: 2 cores here; -n $ITERS4 -w $WARM4 for all three)
#
# Sizes 8 B .. 64 MiB, doubling; REPS runs of each, the three libraries taking
# turns, and the median per size. Prints markdown tables (times, cadre's
# speedup over each MPI) and the goals, writes the medians to
# bench/plots/<mode>-np<N>.dat, draws bench/plots/<mode>-np<N>.png (bus
# bandwidth against size) with gnuplot, and with RESULTS=FILE rewrites the
# "Collectives" section of FILE.
#
#   bench/coll.sh [BUILDDIR]      (default: the source tree; build first)
#   REPS=3 ITERS4=50 WARM4=5 TIMEOUT=900 RESULTS=FILE (write the section into FILE;
#   default: only print, and the figures go into bench/RESULTS.md by hand)
set -euo pipefail
. "$(dirname "$0")/common.sh" "$@"
reps=${REPS:-3}
iters4=${ITERS4:-50}
warm4=${WARM4:-5}
limit=${TIMEOUT:-900}
results=${RESULTS-}
plots=$here/plots
maxb=${MAXB:-67108864} # the largest size (the goals read 16 MiB and 64 MiB)

for t in mpicc mpirun mpicc.mpich mpirun.mpich; do
    command -v $t >/dev/null ||
        { echo "coll.sh: needs $t (Debian: openmpi-bin libopenmpi-dev mpich libmpich-dev)" >&2; exit 1; }
done
mpirun --version 2>&1 | grep -q "Open MPI" ||
    { echo "coll.sh: mpirun is not Open MPI's (update-alternatives --config mpirun)" >&2; exit 1; }

mpicc -O2 -o "$tmp/mpi_coll.ompi" "$here/mpi_coll.c"
mpicc.mpich -O2 -o "$tmp/mpi_coll.mpich" "$here/mpi_coll.c"
: > "$tmp/c2c.log"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "coll.sh: load average $load_before on $(nproc) cores" >&2

# One run of one library: "size time_us" lines. A run that fails or times out
# keeps the sizes it finished.
run_lib() { # lib mode np
    local lib=$1 mode=$2 np=$3 extra=() mextra=()
    if [ "$np" -gt "$(nproc)" ]; then
        extra=(-n "$iters4" -w "$warm4")
        mextra=("$iters4" "$warm4")
    fi
    local cmd
    case $lib in
    cadre)
        if [ "$np" -gt "$(nproc)" ]; then
            cmd=("$cadrerun" -n "$np" --bind-to none "$perf" "$mode" -b 8 -e "$maxb" -f 2 -c 0 "${extra[@]}")
        else
            cmd=("$cadrerun" -n "$np" --bind-to core "$perf" "$mode" -b 8 -e "$maxb" -f 2 -c 0)
        fi ;;
    ompi)
        if [ "$np" -gt "$(nproc)" ]; then
            cmd=(mpirun -np "$np" --oversubscribe --bind-to none "$tmp/mpi_coll.ompi" "$mode" 8 "$maxb" "${mextra[@]}")
        else
            cmd=(mpirun -np "$np" --bind-to core "$tmp/mpi_coll.ompi" "$mode" 8 "$maxb")
        fi ;;
    mpich)
        if [ "$np" -gt "$(nproc)" ]; then
            cmd=(mpirun.mpich -n "$np" "$tmp/mpi_coll.mpich" "$mode" 8 "$maxb" "${mextra[@]}")
        else
            cmd=(mpirun.mpich -n "$np" -bind-to core "$tmp/mpi_coll.mpich" "$mode" 8 "$maxb")
        fi ;;
    esac
    timeout "$limit" "${cmd[@]}" > "$tmp/out" 2> "$tmp/err" ||
        echo "coll.sh: '${cmd[*]}' failed ($?): $(tail -1 "$tmp/err")" >&2
    awk '!/^#/ && NF >= 6 { print $1, $6 }' "$tmp/out"
}

configs=("allreduce 2" "allgather 2" "reduce_scatter 2" "bcast 2" "allreduce 4")
mkdir -p "$plots"
for cfg in "${configs[@]}"; do
    set -- $cfg
    for lib in cadre ompi mpich; do : > "$tmp/$1-$2.$lib"; done
    for ((r = 1; r <= reps; r++)); do
        "$tmp/c2c" | awk '{ print $2 }' >> "$tmp/c2c.log"
        for lib in cadre ompi mpich; do
            echo "coll.sh: $1 on $2 ranks, $lib, run $r of $reps" >&2
            run_lib $lib "$1" "$2" >> "$tmp/$1-$2.$lib"
        done
    done
    for lib in cadre ompi mpich; do size_median < "$tmp/$1-$2.$lib" | sort -k1,1 > "$tmp/$1-$2.$lib.med"; done
    join -a 1 -a 2 -e '?' -o 0,1.2,2.2 "$tmp/$1-$2.cadre.med" "$tmp/$1-$2.ompi.med" |
        join -a 1 -a 2 -e '?' -o 0,1.2,1.3,2.2 - "$tmp/$1-$2.mpich.med" | sort -n |
        awk -v mode="$1" -v np="$2" '
            # nccl-tests bus bandwidth factors, as cadre-perf
            BEGIN { fac = mode == "allreduce" ? 2 * (np - 1) / np : mode == "bcast" ? 1 : (np - 1) / np
                    print "# " mode ", float32, " np " ranks: medians; bus bandwidth with factor " fac
                    print "# size(B) cadre(us) openmpi(us) mpich(us) cadre_busbw openmpi_busbw mpich_busbw (GB/s)" }
            function bw(t) { return t == "?" || t <= 0 ? "?" : sprintf("%.6g", $1 / t / 1e3 * fac) }
            { print $1, $2, $3, $4, bw($2), bw($3), bw($4) }' > "$plots/$1-np$2.dat"
done

ompi_ver=$(mpirun --version 2>&1 | head -1 | sed 's/.*(Open MPI) //')
mpich_ver=$(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p')
mpich_dev=$(mpichversion 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p')

# ---- plots ----
if command -v gnuplot >/dev/null; then
    for cfg in "${configs[@]}"; do
        set -- $cfg
        what="$1, float32"
        [ "$1" = bcast ] || [ "$1" = allgather ] || what="$what sum"
        extra=""
        [ "$2" -gt "$(nproc)" ] && extra=" (oversubscribed: $(nproc) cores)"
        gnuplot <<EOF
set terminal png size 900,560 font ",11"
set output "$plots/$1-np$2.png"
set datafile missing "?"
set title "$what, $2 ranks$extra: bus bandwidth (higher is better)"
set xlabel "size (bytes)"
set ylabel "bus bandwidth (GB/s)"
set logscale x 2
set logscale y 10
set xtics ("8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "2M" 2097152, "16M" 16777216, "64M" 67108864)
set format y "%g"
set grid xtics ytics mytics
set key top left box opaque
plot "$plots/$1-np$2.dat" using 1:5 with linespoints lw 2 pt 7 title "cadre", \
     "" using 1:6 with linespoints lw 2 pt 5 title "Open MPI $ompi_ver", \
     "" using 1:7 with linespoints lw 2 pt 9 title "MPICH $mpich_ver"
EOF
    done
else
    echo "coll.sh: no gnuplot (apt-get install gnuplot-nox): no plots" >&2
fi

# ---- tables and goals ----
table() { # mode np
    printf '| size (B) | cadre (µs) | Open MPI (µs) | MPICH (µs) | cadre vs Open MPI | cadre vs MPICH |\n'
    printf '|---:|---:|---:|---:|---:|---:|\n'
    awk '!/^#/ {
        sp1 = ($2 == "?" || $3 == "?") ? "—" : sprintf("%.2f×", $3 / $2)
        sp2 = ($2 == "?" || $4 == "?") ? "—" : sprintf("%.2f×", $4 / $2)
        printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, sp1, sp2 }' "$plots/$1-np$2.dat"
}
val() { # file size column -> value ("?" when missing)
    awk -v s="$2" -v c="$3" '!/^#/ && $1 == s { print $c; found = 1 } END { if (!found) print "?" }' "$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "?" || b == "?") print "?"; else printf "%.2f", a / b }'; }
verdict() { # ratio min -> met / NOT met
    awk -v r="$1" -v m="$2" 'BEGIN { if (r == "?") print "not measured"; else if (r + 0 >= m) print "**met**"; else print "**not met**" }'
}

goals() {
    local d=$plots r1 r2 c o m
    c=$(val $d/allreduce-np2.dat $maxb 2); o=$(val $d/allreduce-np2.dat $maxb 3); m=$(val $d/allreduce-np2.dat $maxb 4)
    r1=$(ratio "$o" "$c"); r2=$(ratio "$m" "$c")
    echo "- 64 MiB float32 allreduce, 2 ranks, ≥3× faster than Open MPI: cadre $c µs, Open MPI $o µs ($r1×),"
    echo "  MPICH $m µs ($r2×): $(verdict "$r1" 3)."
    c=$(val $d/allreduce-np2.dat 8 2); o=$(val $d/allreduce-np2.dat 8 3); m=$(val $d/allreduce-np2.dat 8 4)
    r1=$(ratio "$o" "$c"); r2=$(ratio "$m" "$c")
    echo "- 8-byte allreduce, 2 ranks, no slower than Open MPI: cadre $c µs, Open MPI $o µs ($r1×),"
    echo "  MPICH $m µs ($r2×): $(verdict "$r1" 1)."
    for mode in allgather reduce_scatter bcast; do
        c=$(val $d/$mode-np2.dat 16777216 2); o=$(val $d/$mode-np2.dat 16777216 3); m=$(val $d/$mode-np2.dat 16777216 4)
        r1=$(ratio "$o" "$c"); r2=$(ratio "$m" "$c")
        echo "- 16 MiB $mode, 2 ranks, ≥2× faster than Open MPI: cadre $c µs, Open MPI $o µs ($r1×),"
        echo "  MPICH $m µs ($r2×): $(verdict "$r1" 2)."
    done
    local slow_o slow_m
    slow_o=$(awk '!/^#/ && $2 != "?" && $3 != "?" && $2 > $3 { printf "%s%s", sep, $1; sep = ", " }' $d/allreduce-np4.dat)
    slow_m=$(awk '!/^#/ && $2 != "?" && $4 != "?" && $2 > $4 { printf "%s%s", sep, $1; sep = ", " }' $d/allreduce-np4.dat)
    echo "- allreduce, 4 ranks (oversubscribed), no size where cadre is slower than Open MPI:"
    if [ -z "$slow_o" ]; then
        echo "  slower at no size: **met**."
    else
        echo "  slower at $slow_o B: **not met**."
    fi
    echo "  Against MPICH: slower at ${slow_m:-no size}${slow_m:+ B}."
}

cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
rev=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
section=$(
    echo "## Collectives"
    echo
    echo "$(date -u +%Y-%m-%d), \`bench/coll.sh\` (REPS=$reps), cadre $rev: \`cadre-perf MODE -b 8 -e 64M -f 2 -c 0\`"
    echo "under \`cadrerun\` beside \`bench/mpi_coll.c\` (the same loops, sizes, iterations and warm-ups:"
    echo "float32, sum, root 0, out of place; the time of one call, the largest over the ranks) under"
    echo "Open MPI's \`mpirun\` and MPICH's \`mpirun.mpich\`, the three taking turns; the median of $reps runs"
    echo "per size. Sizes as in nccl-tests: count × 4 B for allreduce and bcast, the whole buffer"
    echo "(count per rank × ranks × 4 B) for allgather and reduce_scatter. \"vs\" columns: the MPI's time"
    echo "over cadre's (above 1: cadre is faster)."
    echo
    echo "- machine: $(nproc) CPUs ($cpu), $(uname -sr); load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- core-to-core round trip (bench/c2c.c) before each turn of the three libraries: $(sort -n "$tmp/c2c.log" | awk '{ v[NR] = $1 } END { printf "%s to %s ns, median %s", v[1], v[NR], v[int((NR + 1) / 2)] }') (the host moves this VM's two vCPUs between cores that share a cache and cores that do not; every figure below moves with it)"
    echo "- Open MPI $ompi_ver (\`mpirun -np N --bind-to core\`), MPICH $mpich_ver, device $mpich_dev (\`mpirun.mpich -n N -bind-to core\`)"
    echo "- 2 ranks: bound to a core each (\`cadrerun --bind-to core\`); 4 ranks on $(nproc) cores: no binding,"
    echo "  \`mpirun --oversubscribe\`, and $iters4 timed iterations after $warm4 warm-ups at every size for all"
    echo "  three (MPICH's ranks spin without yielding, and take milliseconds per call when oversubscribed)"
    echo "- plots (bus bandwidth against size): \`bench/plots/*.png\`, data in \`bench/plots/*.dat\`"
    echo
    echo "### Goals"
    echo
    goals
    for cfg in "${configs[@]}"; do
        set -- $cfg
        echo
        echo "### $1, $2 ranks$([ "$2" -gt "$(nproc)" ] && echo " (oversubscribed)")"
        echo
        echo "![$1, $2 ranks](plots/$1-np$2.png)"
        echo
        table "$1" "$2"
    done
)
echo "$section"

if [ -n "$results" ]; then
    [ -f "$results" ] || printf '# Benchmark results\n' > "$results"
    # Replace this section only, where it stands: other benchmarks and the
    # notes after it keep theirs. A file without it gets it at the end.
    printf '%s\n' "$section" > "$tmp/section"
    awk -v title="## Collectives" -v sec="$tmp/section" '
        function put() { while ((getline l < sec) > 0) print l; print ""; done = 1 }
        $0 == title { skip = 1; put(); next }
        skip && /^## / { skip = 0 }
        !skip { print }
        END { if (!done) { print ""; put() } }' "$results" > "$tmp/results"
    sed -i -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$tmp/results"
    cp "$tmp/results" "$results"
    echo "coll.sh: wrote $results" >&2
fi
