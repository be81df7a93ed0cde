#!/bin/sh
# install-check.sh BINDIR LIBDIR [PREFIX]: checks an installed cadre as a user
# meets it after `make install` (make installcheck runs it, and so make
# distcheck; .ci/run runs it after the README's Installing steps in the tree
# the quick start built). Each installed tool must start and answer; a
# program built with the installed cadrecc, and one built with pkg-config,
# must run on 2 ranks under the installed cadrerun and get the right sum; one
# linked against the static libcadre.a with `pkg-config --static --libs
# cadre` must run too, and a fully static link is tried where every library
# has its archive. A CMake project (find_package(cadre), cadre::cadre) found
# through CMAKE_PREFIX_PATH=PREFIX must build and run alone, as a 1-rank job
# and on 2 ranks, and again from a copy of the installed files under another
# prefix. Prints one line per check; exits 1 if any failed.
set -u
bindir=$1
libdir=$2
prefix=${3:-$(dirname "$libdir")}
fails=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cadre-install-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

ok() { echo "install-check: ok: $*"; }
bad() {
    echo "install-check: FAILED: $1" >&2
    [ -s "$tmp/out" ] && sed 's/^/    /' "$tmp/out" >&2
    fails=$((fails + 1))
}
# check DESCRIPTION COMMAND...: the command must exit 0 within 120 s.
check() {
    d=$1
    shift
    if timeout 120 "$@" >"$tmp/out" 2>&1; then ok "$d"; else bad "$d (exit $?): $*"; fi
}
# expect DESCRIPTION PATTERN: the last command's output must match.
expect() {
    if grep -q -- "$2" "$tmp/out"; then ok "$1"; else bad "$1: no '$2' in the output"; fi
}

for t in cadrerun cadrecc cadre-info cadre-perf; do
    if [ ! -x "$bindir/$t" ]; then
        bad "$bindir/$t is not installed"
    fi
done
check "cadre-info runs" "$bindir/cadre-info"
expect "cadre-info names the version" "^cadre version"
check "cadre-info --version" "$bindir/cadre-info" --version
check "cadrerun --version" "$bindir/cadrerun" --version
check "cadrecc --showme:version" "$bindir/cadrecc" --showme:version
check "cadre-perf on 2 ranks" "$bindir/cadrerun" -n 2 "$bindir/cadre-perf" allreduce -b 8 -e 1K \
    -f 4 -n 3 -w 1 -c 1
expect "cadre-perf's closing line" "^# Out of bounds values : 0 OK"

cat >"$tmp/app.c" <<'EOF'
#include <stdio.h>
#include <cadre.h>
int main(int argc, char **argv)
{
    int rank, size, sum = 0, major, minor, patch;
    if (cadre_init(&argc, &argv) != CADRE_SUCCESS) {
        fprintf(stderr, "cadre_init: %s\n", cadre_last_error());
        return 1;
    }
    cadre_comm_rank(CADRE_COMM_WORLD, &rank);
    cadre_comm_size(CADRE_COMM_WORLD, &size);
    int mine = rank + 1;
    if (cadre_allreduce(&mine, &sum, 1, CADRE_INT32, CADRE_SUM, CADRE_COMM_WORLD) != CADRE_SUCCESS ||
        sum != size * (size + 1) / 2) {
        fprintf(stderr, "rank %d: sum %d, want %d\n", rank, sum, size * (size + 1) / 2);
        return 1;
    }
    cadre_version(&major, &minor, &patch);
    printf("rank %d of %d: sum %d, cadre %d.%d.%d\n", rank, size, sum, major, minor, patch);
    return cadre_finalize() == CADRE_SUCCESS ? 0 : 1;
}
EOF
cc=$("$bindir/cadrecc" --showme:command)

# run_app NAME: NAME was built; it must run alone and on 2 ranks.
run_app() {
    check "$1 runs alone" "$tmp/$1"
    expect "$1 alone: the sum" "rank 0 of 1: sum 1"
    check "$1 on 2 ranks" "$bindir/cadrerun" -n 2 "$tmp/$1"
    expect "$1 on 2 ranks: the sum" "of 2: sum 3"
}

check "cadrecc builds a program" "$bindir/cadrecc" -o "$tmp/app_cc" "$tmp/app.c"
[ -x "$tmp/app_cc" ] && run_app app_cc
check "cadrecc -c, then cadrecc links" sh -c \
    "cd '$tmp' && '$bindir/cadrecc' -c app.c && '$bindir/cadrecc' -o app_2step app.o"
[ -x "$tmp/app_2step" ] && run_app app_2step

PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
if cflags=$(pkg-config --cflags cadre) && libs=$(pkg-config --libs cadre) &&
    slibs=$(pkg-config --static --libs cadre); then
    ok "pkg-config cadre"
    # cadre.h needs no other package's headers: --cflags gives cadre's
    # include directory alone (or nothing, where that is a system one).
    incdir=$(pkg-config --variable=includedir cadre)
    extra=
    for f in $cflags; do
        [ "$f" = "-I$incdir" ] || extra="$extra $f"
    done
    if [ -z "$extra" ]; then
        ok "pkg-config --cflags cadre: $cflags"
    else
        : >"$tmp/out"
        bad "pkg-config --cflags cadre adds$extra to -I$incdir"
    fi
    # shellcheck disable=SC2086 # the flags are words
    check "pkg-config builds a program" $cc $cflags -o "$tmp/app_pc" "$tmp/app.c" $libs
    [ -x "$tmp/app_pc" ] && run_app app_pc
    if [ -f "$libdir/libcadre.a" ]; then
        # libcadre from its archive, the other libraries as they come: what
        # --static's private libraries must make link.
        alibs=$(echo " $slibs " | sed 's/ -lcadre / -Wl,-Bstatic -lcadre -Wl,-Bdynamic /')
        # shellcheck disable=SC2086
        check "pkg-config --static links libcadre.a" $cc $cflags -o "$tmp/app_a" "$tmp/app.c" $alibs
        if [ -x "$tmp/app_a" ]; then
            if readelf -d "$tmp/app_a" | grep -q 'NEEDED.*libcadre'; then
                bad "app_a was linked against libcadre.so, not libcadre.a"
            else
                run_app app_a
            fi
        fi
        # A fully static program needs an archive of every library, and
        # archives that list their own dependencies; say why when not.
        # shellcheck disable=SC2086
        if timeout 120 $cc -static $cflags -o "$tmp/app_static" "$tmp/app.c" $slibs \
            >"$tmp/out" 2>&1; then
            ok "gcc -static with pkg-config --static"
            run_app app_static
        else
            echo "install-check: skipped: a fully static link (not every library allows it here):"
            grep -m 3 -E 'cannot find|undefined reference' "$tmp/out" | sed 's/^/    /'
        fi
    else
        echo "install-check: skipped: no $libdir/libcadre.a (configured with --disable-static)"
    fi
else
    bad "pkg-config --cflags --libs cadre with PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
fi

# cmake_app NAME PREFIX_PATH: a CMake project that finds cadre under
# PREFIX_PATH builds NAME from app.c, which must run alone, as a 1-rank job
# and on 2 ranks.
cmake_app() {
    mkdir -p "$tmp/$1.src" "$tmp/$1.build"
    cp "$tmp/app.c" "$tmp/$1.src/app.c"
    cat >"$tmp/$1.src/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.13)
project(cadre_install_check C)
find_package(cadre 0.1 REQUIRED)
add_executable($1 app.c)
target_link_libraries($1 PRIVATE cadre::cadre)
EOF
    check "cmake configures a project with find_package(cadre) ($2)" \
        cmake -S "$tmp/$1.src" -B "$tmp/$1.build" -DCMAKE_PREFIX_PATH="$2" -DCMAKE_C_COMPILER="$cc"
    check "cmake builds it against cadre::cadre" cmake --build "$tmp/$1.build"
    if [ -x "$tmp/$1.build/$1" ]; then
        cp "$tmp/$1.build/$1" "$tmp/$1"
        check "$1 as a 1-rank job" "$bindir/cadrerun" -n 1 "$tmp/$1"
        expect "$1 as a 1-rank job: the sum" "rank 0 of 1: sum 1"
        run_app "$1"
    fi
}
if ! command -v cmake >/dev/null 2>&1; then
    bad "cmake is not installed: the CMake package cannot be checked (Debian: apt-get install cmake)"
elif [ ! -f "$libdir/cmake/cadre/cadreConfig.cmake" ] ||
    [ ! -f "$libdir/cmake/cadre/cadreConfigVersion.cmake" ]; then
    bad "no cadreConfig.cmake and cadreConfigVersion.cmake in $libdir/cmake/cadre"
else
    ok "cadreConfig.cmake and cadreConfigVersion.cmake installed"
    cmake_app app_cmake "$prefix"
    # A request for a version this cadre does not serve must fail.
    mkdir -p "$tmp/v.src"
    printf 'cmake_minimum_required(VERSION 3.13)\nproject(v C)\nfind_package(cadre 99 REQUIRED)\n' \
        >"$tmp/v.src/CMakeLists.txt"
    if timeout 120 cmake -S "$tmp/v.src" -B "$tmp/v.build" -DCMAKE_PREFIX_PATH="$prefix" \
        >"$tmp/out" 2>&1; then
        bad "find_package(cadre 99) succeeded"
    else
        ok "find_package(cadre 99) fails"
    fi
    # Relocatable: the library, the header and the package copied in the
    # same layout under another prefix are found there.
    inc=$(sed -n 's/^set(_cadre_inc "\(.*\)")$/\1/p' "$libdir/cmake/cadre/cadreConfig.cmake")
    case $libdir/:$inc in
    "$prefix"/*:[!/]*)
        moved=$tmp/moved
        lrel=${libdir#"$prefix"/}
        mkdir -p "$moved/$lrel/cmake"
        cp -P "$libdir"/libcadre.so* "$moved/$lrel/"
        cp -R "$libdir/cmake/cadre" "$moved/$lrel/cmake/"
        mkdir -p "$moved/$lrel/cmake/cadre/$inc"
        cp "$libdir/cmake/cadre/$inc/cadre.h" "$moved/$lrel/cmake/cadre/$inc/"
        cmake_app app_moved "$moved"
        if [ -x "$tmp/app_moved" ] && ! readelf -d "$tmp/app_moved" | grep -q "$moved"; then
            bad "app_moved does not take libcadre from the moved tree"
        fi
        ;;
    *) echo "install-check: skipped: cadre.h or libcadre is not below $prefix: not relocatable" ;;
    esac
fi

if [ "$fails" -gt 0 ]; then
    echo "install-check: $fails checks failed" >&2
    exit 1
fi
echo "install-check: all passed"
