#!/usr/bin/env bash
# Launch time: 8 ranks doing init + finalize under cadrerun (examples/hello)
# against an MPI hello (MPI_Init/MPI_Finalize) under mpirun -np 8, in the
# same run, alternating the two so drift hits both alike. Prints the figures
# and, with RESULTS=FILE, rewrites its "Launch: 8 ranks init+finalize" section.
#
#   bench/launch.sh [BUILDDIR]     (default: the source tree)
#   RUNS=10 NP=8 RESULTS=FILE (write the section into FILE; default: only print)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$(cd "${1:-$top}" && pwd)
runs=${RUNS:-10}
np=${NP:-8}
results=${RESULTS-}

cadrerun=$build/launcher/cadrerun
hello=$build/examples/hello
for f in "$cadrerun" "$hello"; do
    [ -x "$f" ] || { echo "launch.sh: $f missing: build first (make)" >&2; exit 1; }
done
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    { echo "launch.sh: needs mpicc and mpirun (Debian: openmpi-bin libopenmpi-dev)" >&2; exit 1; }

work=$(mktemp -d /tmp/cadre-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/mpi_hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("hello from rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
EOF
mpicc -O2 -o "$work/mpi_hello" "$work/mpi_hello.c"

mpirun_cmd=(mpirun -np "$np" --oversubscribe)
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# Runs a command once; prints its wall time in seconds, or fails unless every
# rank said hello.
timed() {
    local t0 t1 out
    t0=$EPOCHREALTIME
    out=$("$@" 2>&1)
    t1=$EPOCHREALTIME
    local n
    n=$(grep -c '^hello from rank' <<<"$out" || true)
    if [ "$n" != "$np" ]; then
        echo "launch.sh: '$*' printed $n hello lines, not $np:" >&2
        echo "$out" >&2
        return 1
    fi
    echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.3f", m}'; }
minimum() { sort -g | head -1 | awk '{printf "%.3f", $1}'; }

# One warm-up each (page cache, first-use costs), not counted.
timed "$cadrerun" -n "$np" "$hello" >/dev/null
timed "${mpirun_cmd[@]}" "$work/mpi_hello" >/dev/null
: > "$work/c"
: > "$work/m"
for ((i = 0; i < runs; i++)); do
    timed "$cadrerun" -n "$np" "$hello" >> "$work/c"
    timed "${mpirun_cmd[@]}" "$work/mpi_hello" >> "$work/m"
done
cmed=$(median < "$work/c")
mmed=$(median < "$work/m")
cmin=$(minimum < "$work/c")
mmin=$(minimum < "$work/m")
ratio=$(echo "$cmed / $mmed" | bc -l | awk '{printf "%.2f", $1}')

cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
ompi=$(mpirun --version 2>/dev/null | head -1)
pmix=$(pkg-config --modversion pmix 2>/dev/null || echo unknown)
section=$(cat <<EOF
## Launch: 8 ranks init+finalize

$(date -u +%Y-%m-%d), \`bench/launch.sh\` (RUNS=$runs, NP=$np): wall time of one whole job,
median and best of $runs runs each, alternating the two launchers after one warm-up each.

- cadrerun: \`cadrerun -n $np examples/hello\` (cadre_init, print, cadre_finalize)
- mpirun: \`mpirun -np $np --oversubscribe mpi_hello\` (MPI_Init, print, MPI_Finalize; $ompi)
- machine: $(nproc) CPUs ($cpu), $(uname -sr), libpmix $pmix

| launcher | median (s) | best (s) |
|----------|-----------:|---------:|
| cadrerun | $cmed | $cmin |
| mpirun   | $mmed | $mmin |

cadrerun takes $ratio of mpirun's median time (goal: at most 0.5).
EOF
)
echo "$section"

if [ -n "$results" ]; then
    [ -f "$results" ] || printf '# Benchmark results\n' > "$results"
    # Replace this section only: other benchmarks keep theirs.
    awk -v title="## Launch: 8 ranks init+finalize" '
        $0 == title { skip = 1; next }
        skip && /^## / { skip = 0 }
        !skip { print }' "$results" > "$work/results"
    sed -i -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$work/results"
    { cat "$work/results"; echo; echo "$section"; } > "$results"
    echo "launch.sh: wrote $results" >&2
fi
