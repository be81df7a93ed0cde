# The start the bench scripts share; a script sources it first:
#   . "$(dirname "$0")/common.sh" "$@"
# Sets here (bench/), top (the source tree), build (the first argument, or
# the source tree; built first), cadrerun and perf (checked to be there),
# tmp (a directory removed at exit), allows Open MPI to run as root, and
# builds $tmp/c2c (bench/c2c.c: the vCPUs' core-to-core round trip).
# Defines median (of numbers on stdin, one per line) and size_median (the
# median per size of "size value" lines), median_rows (two such files side by
# side as markdown rows).
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$(cd "${1:-$top}" && pwd)
cadrerun=$build/launcher/cadrerun
perf=$build/tools/cadre-perf
for f in "$cadrerun" "$perf"; do
    [ -x "$f" ] || { echo "$(basename "$0"): $f missing: build first (make)" >&2; exit 1; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d "/tmp/cadre-$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cc -O2 -pthread -o "$tmp/c2c" "$here/c2c.c"

# numbers on stdin, one per line -> their median (the lower middle for an
# even count)
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# "size value" lines on stdin -> per size, in increasing size, the median of
# its values (the lower middle for an even count)
size_median() {
    sort -k1,1n -k2,2g | awk '
        { n[$1]++; v[$1, n[$1]] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
        END { for (i = 1; i <= k; i++) { s = order[i]; print s, v[s, int((n[s] + 1) / 2)] } }'
}
# median_rows A B: markdown rows "| size | median of A | median of B | B / A |"
# from two files of "size value" lines (? where a side has no value).
median_rows() {
    size_median <"$1" | sort -k1,1 >"$tmp/median_rows.a"
    size_median <"$2" | sort -k1,1 >"$tmp/median_rows.b"
    join -a 1 -a 2 -e '?' -o 0,1.2,2.2 "$tmp/median_rows.a" "$tmp/median_rows.b" | sort -n |
        awk '{ s = ($2 != "?" && $3 != "?" && $2 > 0) ? sprintf("%.2f", $3 / $2) : "?"
               printf "| %s | %s | %s | %s |\n", $1, $2, $3, s }'
}
