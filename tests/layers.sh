#!/bin/sh
# layers.sh - checks that the library's folders call only down the order
# declared in LAYERS (top of the tree; doc/DESIGN-layers.md explains it).
#
#   sh tests/layers.sh SRCDIR BUILDDIR [LAYERS-FILE]
#
# Two kinds of edge between folders are collected:
#  - includes: every #include "..." of every .c, .h, .cu and .cuh file of a
#    checked folder; "dir/file" names folder dir, a bare "file" is the
#    including file's sibling, else include/ or the top of the tree, else
#    whichever folder holds a file of that name;
#  - calls: from the objects of BUILDDIR (nm -P): which folder defines each
#    global symbol and which folder's objects use it. This sees what the
#    compiler saw, through macros and inline functions of headers.
# It fails (exit 1) on every edge that goes up the order, or to a folder an
# "apart" folder may not use, on a source folder LAYERS does not place, on
# every cycle between folders, printing the file, include or symbol and the
# edge, and on a call of the CUDA API in a layer other than LAYERS' "cuda". With no failure it prints the edges it accepted, per pair.
set -u
src=${1:?usage: layers.sh SRCDIR BUILDDIR [LAYERS]}
build=${2:?usage: layers.sh SRCDIR BUILDDIR [LAYERS]}
layers=${3:-$src/LAYERS}
NM=${NM:-nm}

[ -r "$layers" ] || { echo "layers: cannot read $layers" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/layers.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# LAYERS: "layer F" lines bottom to top; "apart F USES..." (folders, or
# "api": the public cadre_* functions); "shared F" (anyone may include it);
# "skip F" (not part of the library: tests, benchmarks); "cuda F" (the one
# layer that may call the CUDA API).
awk '!/^[ \t]*(#|$)/' "$layers" > "$tmp/decl"
folders=$(awk '$1 == "layer" || $1 == "apart" { print $2 }' "$tmp/decl")

# Every folder of the tree with C or CUDA sources must be placed (its edges
# are collected all the same, for the cycles).
fail=0
for d in "$src"/*/; do
    d=${d%/}; f=${d##*/}
    case $f in build*|autom4te.cache|m4|_san) continue ;; esac
    ls "$d"/*.c "$d"/*.cu >/dev/null 2>&1 || continue
    if ! awk -v f="$f" '$2 == f { found = 1 } END { exit !found }' "$tmp/decl"; then
        echo "layers: FOLDER   $f/ holds sources but LAYERS does not place it"
        fail=1
        folders="$folders $f"
    fi
done

# ---- includes: "folder file target-folder what" -------------------------------
: > "$tmp/edges"
for f in $folders; do
    for file in "$src/$f"/*.c "$src/$f"/*.h "$src/$f"/*.cu "$src/$f"/*.cuh; do
        [ -f "$file" ] || continue
        rel=$f/${file##*/}
        sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$file" | while read -r inc; do
            case $inc in
            */*) to=${inc%%/*} ;;
            *)
                if [ -f "$src/$f/$inc" ]; then to=$f
                elif [ -f "$src/include/$inc" ]; then to=include
                elif [ -f "$src/$inc" ] || [ "$inc" = config.h ]; then to=.
                else
                    to=$(cd "$src" && ls */"$inc" 2>/dev/null | head -n 1)
                    to=${to%%/*}
                    [ -n "$to" ] || to='?'
                fi ;;
            esac
            [ "$to" = "$f" ] || echo "$f $rel $to include:\"$inc\""
        done
    done
done >> "$tmp/edges"

# ---- calls: "folder object target-folder call:symbol" ---------------------------
: > "$tmp/syms"
for f in $folders; do
    [ -d "$build/$f" ] || continue
    # libtool keeps the PIC objects in .libs/ and, for a static build, the
    # others beside them; both are read (they name the same objects, and the
    # edges are counted once): a --disable-static build has objects beside
    # .libs/ too, the CUDA ones of device/nvcc-lo.sh, and reading those alone
    # would leave the folder's C objects unchecked.
    objs=$(ls "$build/$f"/*.o "$build/$f"/.libs/*.o 2>/dev/null)
    if [ -z "$objs" ] && ls "$src/$f"/*.c >/dev/null 2>&1; then
        echo "layers: FOLDER $f/ has no objects in $build/$f (build first)"
        fail=1
    fi
    for o in $objs; do
        # libcadre_p2p_la-p2p_match.o -> p2p/p2p_match.o
        name=${o##*/}; name=${name#*_la-}; name=${name#cadrerun-}; name=${name#cadre_info-}
        name=${name#cadre_perf-}
        # An object whose source is gone (a file moved since it was built)
        # says nothing about the tree.
        [ -f "$src/$f/${name%.o}.c" ] || [ -f "$src/$f/${name%.o}.cu" ] || continue
        "$NM" -P "$o" 2>/dev/null | awk -v f="$f" -v o="$f/$name" \
            '$2 == "U" || $2 == "w" || $2 == "v" { print "U", $1, f, o; next }
             $2 ~ /^[A-Z]$/ { print "D", $1, f, o }'
    done
done > "$tmp/syms"
# No symbol at all means nm could not read the objects: the calls would
# go unchecked.
if ! grep -q '^D ' "$tmp/syms"; then
    echo "layers: no symbols read from the objects of $build ($NM -P failed?)"
    fail=1
fi
awk '$1 == "D" { if (!($2 in def)) def[$2] = $3; next }
     { use[NR] = $0 }
     END {
        for (i in use) {
            split(use[i], u, " ")
            if ((u[2] in def) && def[u[2]] != u[3])
                print u[3], u[4], def[u[2]], "call:" u[2]
        }
     }' "$tmp/syms" | sort -u >> "$tmp/edges"

# ---- the CUDA API: "cuda F" (LAYERS) -------------------------------------------
# Of the library's layers only folder F calls the CUDA API (a cuda* or cu*
# function): the device path keeps to its folder, and the layers below reach
# it through runtime/runtime_device.h's table. Seen in the sources (a call,
# whatever the build) and, in a CUDA build, in the objects (what they use).
# Apart folders are programs: they may use CUDA as any user does.
cuda=$(awk '$1 == "cuda" { print $2 }' "$tmp/decl")
if [ -n "$cuda" ]; then
    for f in $(awk '$1 == "layer" { print $2 }' "$tmp/decl"); do
        [ "$f" = "$cuda" ] && continue
        for file in "$src/$f"/*.c "$src/$f"/*.h "$src/$f"/*.cu "$src/$f"/*.cuh; do
            [ -f "$file" ] || continue
            grep -nE '(^|[^A-Za-z0-9_])cu(da)?[A-Z][A-Za-z0-9_]*[ \t]*\(' "$file" |
                sed "s|^\([0-9]*\):.*|layers: CUDA     $f/${file##*/}:\1 calls the CUDA API (LAYERS: only $cuda/ may)|"
        done
        awk -v f="$f" -v c="$cuda" '$1 == "U" && $3 == f && $2 ~ /^_*cu(da)?[A-Z]/ {
            printf "layers: CUDA     %s uses %s (LAYERS: only %s/ may)\n", $4, $2, c }' "$tmp/syms" |
            sort -u
    done > "$tmp/cuda"
    if [ -s "$tmp/cuda" ]; then
        cat "$tmp/cuda"
        fail=1
    fi
fi

# ---- judge ------------------------------------------------------------------
awk -v fail="$fail" '
    FNR == NR {
        if ($1 == "layer") { rank[$2] = ++n; order = order (order ? " < " : "") $2 }
        else if ($1 == "apart") { apart[$2] = 1; for (i = 3; i <= NF; i++) may[$2, $i] = 1 }
        else if ($1 == "shared") shared[$2] = 1
        else if ($1 == "skip") skip[$2] = 1
        next
    }
    {
        from = $1; file = $2; to = $3; what = $4
        if (to == "." || (to in shared)) next
        bad = ""
        if (to == "?")
            bad = "UNRESOLVED"
        else if (what ~ /^call:cadre_[a-z]/ && (from SUBSEP "api") in may)
            bad = ""
        else if (from in apart)
            bad = ((from SUBSEP to) in may) ? "" : "APART"
        else if (!(from in rank)) bad = "UNPLACED"
        else if (to in apart) bad = "APART"
        else if (!(to in rank)) bad = (to in skip) ? "SKIPPED" : "UNPLACED"
        else if (rank[to] > rank[from]) bad = "UP"
        if (to != "?") { reach[from, to] = 1; node[from] = 1; node[to] = 1 }
        if (bad != "") {
            printf "layers: %-8s %s -> %s  %s  %s\n", bad, from, to, file, what
            nbad++
        } else ok[from " -> " to]++
    }
    END {
        # Cycles between folders: the folders that reach each other.
        for (k in node) for (i in node) for (j in node)
            if (((i, k) in reach) && ((k, j) in reach)) reach[i, j] = 1
        for (i in node) {
            if (!((i, i) in reach) || (i in done)) continue
            cyc = i; done[i] = 1
            for (j in node)
                if (j != i && ((i, j) in reach) && ((j, i) in reach)) { cyc = cyc " " j; done[j] = 1 }
            printf "layers: CYCLE    between folders: %s\n", cyc
            nbad++
        }
        if (nbad || fail) {
            printf "layers: FAILED: %d edge(s) or cycle(s) against LAYERS (order: %s)\n", nbad, order
            exit 1
        }
        printf "layers: ok (order, bottom first: %s); accepted edges:\n", order
        for (e in ok) printf "layers:   %s (%d)\n", e, ok[e]
    }' "$tmp/decl" "$tmp/edges"
