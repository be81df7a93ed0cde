#!/bin/bash
# device-bundle.sh: builds cadre with CUDA here and stages, in one folder that
# travels to the GPU machine, everything tests/gpu/device-run.sh runs there:
# cadrerun, libcadre, cadre-perf, cadre-info, the tests/gpu programs, and every
# shared library they load that the GPU machine may lack (libpmix and its
# plugins, libevent, libhwloc, libmunge, libudev, libz, the CUDA runtime;
# and, where the build has the ucx transport, the UCX that cadre dlopens:
# libucp, libucs, libuct, libucm, libnuma and UCX's cma module in lib/ucx,
# UCX_MODULE_DIR pointing there, so the GPU machine's own UCX, if any, is
# never mixed in).
# The GPU machine has CUDA, PyTorch and NCCL but no libpmix or libevent, and
# nothing can be installed there; only the checkout and a few ignored paths
# (64 MiB in all) reach it. See tests/gpu/README.md for the run itself.
#
#   tests/gpu/device-bundle.sh [-j N] [--dir DIR]
#                                                 build and stage gpu-bundle/dist
#                                                 (DIR/src and DIR/dist with --dir)
#   tests/gpu/device-bundle.sh --from-build DIR [--out DIST] [--allow-no-cuda]
#                                                 stage from a configured and built
#                                                 tree (no build; make check's mode)
#   tests/gpu/device-bundle.sh --verify DIST      only the checks below
#
# The build: the checkout's tracked and untracked-but-not-ignored files are
# copied to gpu-bundle/src (so a checkout configured in place does not get in
# the way, and a second run rebuilds only what changed), configured with
# --with-cuda=$CUDA_DIR (default /usr/local/cuda) --disable-static, and built,
# the tests/gpu programs too. NVCC_ARCH_FLAGS defaults to sm_90 code and
# compute_90 PTX (H100 and H200 are sm_90); set it to build for others.
#
# What comes from the GPU machine, not the bundle: the C runtime (libc, libm,
# libpthread, libdl, librt, ld-linux), libstdc++ and libgcc_s, and the CUDA
# driver (libcuda, libnvidia-*). The CUDA runtime (libcudart.so.13, 0.7 MB) is
# bundled: the programs are built against this toolkit's runtime, whatever the
# GPU machine's own CUDA is; its driver must support CUDA 13 (driver >= 580),
# which device-run.sh checks first.
#
# The checks (--verify, and at the end of the other modes), each failing the
# script: every ELF file of the bundle resolves every library it needs inside
# the bundle or among the libraries above, with LD_LIBRARY_PATH at the bundle
# only; no static archives, libtool files or symbolic links; the required
# files are there;
# the size stays under 48 MiB. Then, as root where unshare works (skipped
# with a line otherwise, or with --no-simulate), the bundle runs as on the GPU
# machine: in a private mount namespace where the system's copies of every
# bundled library (the CUDA runtime too) and the PMIx folder are hidden,
# cadre-info runs, a 2-rank host allreduce runs under the bundled cadrerun,
# (with UCX bundled) a 2-rank host allreduce between two fake hosts over the
# ucx transport (UCX_TLS=tcp on lo) whose ranks log ucx for each other, and
# cadre-perf -G fails with its clear error (no GPU here).
set -u
set -o pipefail

me=device-bundle
say() { echo "$me: $*"; }
die() { echo "$me: error: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

mode=build
from=
root=$top/gpu-bundle
dist=
jobs=${JOBS:-2}
allow_no_cuda=0
simulate=1
max_kib=$((48 * 1024))
while [ $# -gt 0 ]; do
    case $1 in
    -j) jobs=${2:?}; shift ;;
    -j*) jobs=${1#-j} ;;
    --from-build) mode=stage; from=${2:?--from-build needs a directory}; shift ;;
    --verify) mode=verify; dist=${2:?--verify needs a directory}; shift ;;
    --out) dist=${2:?--out needs a directory}; shift ;;
    --dir) root=${2:?--dir needs a directory}; shift ;;
    --allow-no-cuda) allow_no_cuda=1 ;;
    --no-simulate) simulate=0 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done

# ---- which libraries the GPU machine provides ----------------------------------------
# Every library whose soname matches stays out of the bundle and may resolve
# outside it.
from_system() {
    case $1 in
    linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|\
    libutil.so.*|libresolv.so.*|libstdc++.so.*|libgcc_s.so.*|libcuda.so.*|libnvidia-*.so*)
        return 0 ;;
    esac
    return 1
}

is_elf() {
    [ -f "$1" ] && [ ! -L "$1" ] && [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]
}

elf_files() {
    find "$1" -type f | while read -r f; do is_elf "$f" && echo "$f"; done
}

# ldd of one file with the bundle's lib folder alone on LD_LIBRARY_PATH:
# "soname path" per line, path "not-found" when it does not resolve.
deps_of() {
    env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$2/lib" ldd "$1" 2>/dev/null |
        awk '/=>/ { if ($3 == "not") print $1, "not-found"; else print $1, $3 }
             /^[ \t]*\/[^ ]*ld-linux/ { n = split($1, p, "/"); print p[n], $1 }'
}

# ---- staging ----------------------------------------------------------------------
# The real program behind a libtool wrapper, or the file itself.
real_program() {
    local dir=$1 name=$2
    for c in "$dir/.libs/$name" "$dir/$name"; do
        if is_elf "$c"; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

# bring_deps FILE DIST: the libraries FILE (a plugin or module loaded at run
# time, which no ldd of the programs names) needs and DIST/lib lacks, copied
# there and recorded in ORIGINS.
bring_deps() {
    local f=$1 d=$2 soname path
    while read -r soname path; do
        from_system "$soname" && continue
        [ -e "$d/lib/$soname" ] && continue
        [ "$path" = not-found ] && die "$f needs $soname, which does not resolve here either"
        cp -L "$path" "$d/lib/$soname"
        echo "$soname $(readlink -f "$path")" >> "$d/ORIGINS"
    done < <(deps_of "$f" "$d")
}

stage() {
    local b=$1 d=$2
    [ -f "$b/config.h" ] || die "$b is not a configured build tree (no config.h)"
    local cuda=0
    grep -q '^#define HAVE_CUDA 1' "$b/config.h" && cuda=1
    if [ $cuda = 0 ] && [ $allow_no_cuda = 0 ]; then
        die "$b is built without CUDA (configure --with-cuda; or --allow-no-cuda to stage it anyway)"
    fi
    rm -rf "$d"
    mkdir -p "$d/bin" "$d/lib" "$d/tests/gpu" || die "cannot create $d"
    local p
    for p in launcher/cadrerun tools/cadre-perf tools/cadre-info; do
        local f
        f=$(real_program "$b/$(dirname $p)" "$(basename $p)") || die "no program $b/$p (run make)"
        cp "$f" "$d/bin/$(basename $p)"
    done
    # Regular files only, under the names the loader asks for (sonames):
    # no symbolic links to survive the trip.
    [ -e "$b/.libs/libcadre.so.0" ] || die "no $b/.libs/libcadre.so.0 (run make)"
    cp -L "$b/.libs/libcadre.so.0" "$d/lib/libcadre.so.0"
    local t n=0
    for t in kernel_test coll_gpu_test ipc_gpu_test gpu_peerfail copy_bw; do
        if f=$(real_program "$b/tests/gpu" $t); then
            cp "$f" "$d/tests/gpu/$t"
            n=$((n + 1))
        elif [ $cuda = 1 ]; then
            die "no $b/tests/gpu/$t (make -C tests gpu/$t)"
        fi
    done
    [ $cuda = 1 ] || say "this build has no CUDA: no tests/gpu programs, cadre-perf -G refuses"

    # The libraries, to a fixed point: the programs' and libcadre's, then
    # those the copied libraries need. ORIGINS records where each came from.
    : > "$d/ORIGINS"
    # libucp is dlopened (p2p/p2p_ucx_load.c), so no ldd names it: it goes
    # in first, and the loop below brings what it needs.
    local ucx=0 ucp=""
    if grep -q '^#define HAVE_UCX 1' "$b/config.h"; then
        ucp=$(ldconfig -p 2>/dev/null | awk '$1 == "libucp.so.0" { print $NF; exit }')
        [ -n "$ucp" ] && [ -e "$ucp" ] || die "the build has the ucx transport but libucp.so.0 is not installed here"
        cp -L "$ucp" "$d/lib/libucp.so.0" || die "cannot copy $ucp"
        echo "libucp.so.0 $(readlink -f "$ucp")" >> "$d/ORIGINS"
        ucx=1
    fi
    local changed=1 f soname path
    while [ $changed = 1 ]; do
        changed=0
        for f in $(elf_files "$d"); do
            while read -r soname path; do
                from_system "$soname" && continue
                [ -e "$d/lib/$soname" ] && continue
                [ "$path" = not-found ] && die "$f needs $soname, which does not resolve here either"
                cp -L "$path" "$d/lib/$soname" || die "cannot copy $path"
                echo "$soname $(readlink -f "$path")" >> "$d/ORIGINS"
                changed=1
            done < <(deps_of "$f" "$d")
        done
    done

    # libpmix loads its plugins (MCA components) from its own folder, and its
    # help texts from its share folder: both come along, found there through
    # PMIX_MCA_mca_base_component_path and PMIX_PKGDATADIR (env.sh).
    local pmix
    pmix=$(awk '$1 == "libpmix.so.2" { print $2 }' "$d/ORIGINS")
    if [ -n "$pmix" ]; then
        local pdir
        pdir=$(dirname "$pmix")
        if [ -d "$pdir/pmix" ]; then
            mkdir -p "$d/lib/pmix"
            cp "$pdir"/pmix/*.so "$d/lib/pmix/" 2>/dev/null
            echo "pmix-plugins $pdir/pmix" >> "$d/ORIGINS"
            # the plugins' own libraries (libz for pcompress_zlib)
            for f in "$d"/lib/pmix/*.so; do
                bring_deps "$f" "$d"
            done
        fi
        local share=$pdir/../share/pmix
        if [ -d "$share" ]; then
            mkdir -p "$d/share/pmix"
            cp "$share"/help-*.txt "$d/share/pmix/" 2>/dev/null
            echo "pmix-share $(readlink -f "$share")" >> "$d/ORIGINS"
        fi
    fi

    # UCX's modules: only cma (its ib and rdmacm modules need verbs, which
    # the GPU machine need not have, and it has no RDMA device to use).
    if [ $ucx = 1 ]; then
        local m
        m=$(dirname "$(readlink -f "$ucp")")/ucx/libuct_cma.so.0
        mkdir -p "$d/lib/ucx"
        if [ -e "$m" ]; then
            cp -L "$m" "$d/lib/ucx/libuct_cma.so.0"
            echo "ucx-module-cma $(readlink -f "$m")" >> "$d/ORIGINS"
            bring_deps "$d/lib/ucx/libuct_cma.so.0" "$d"
        fi
    fi

    write_env "$d" $ucx
    write_manifest "$b" "$d" $cuda $ucx
    say "staged $d from $b"
}

write_env() {
    cat > "$1/env.sh" <<'EOT'
# Sourced (bash or sh) to use this bundle: `. gpu-bundle/dist/env.sh`.
# Written by tests/gpu/device-bundle.sh; paths are found from this file's place.
if [ -n "${BASH_SOURCE:-}" ]; then
    CADRE_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
else
    CADRE_BUNDLE=${CADRE_BUNDLE:?set CADRE_BUNDLE to the bundle folder before sourcing env.sh from sh}
fi
export CADRE_BUNDLE
export PATH="$CADRE_BUNDLE/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$CADRE_BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PMIX_MCA_mca_base_component_path="$CADRE_BUNDLE/lib/pmix"
export PMIX_PKGDATADIR="$CADRE_BUNDLE/share/pmix"
# hwloc's optional plugins (pci, opencl, ...) are not bundled: no warnings
# about a plugin folder that is not there.
export HWLOC_PLUGINS_PATH="$CADRE_BUNDLE/lib/hwloc"
EOT
    if [ "${2:-0}" = 1 ]; then
        cat >> "$1/env.sh" <<'EOT'
# The bundled UCX's modules, never those of a UCX installed on the machine.
export UCX_MODULE_DIR="$CADRE_BUNDLE/lib/ucx"
EOT
    fi
}

write_manifest() {
    local b=$1 d=$2 cuda=$3 ucx=${4:-0} commit=unknown dirty=
    if git -C "$top" rev-parse HEAD >/dev/null 2>&1; then
        commit=$(git -C "$top" rev-parse HEAD)
        [ -n "$(git -C "$top" status --porcelain --untracked-files=no 2>/dev/null)" ] && dirty=" (with uncommitted changes)"
    fi
    {
        echo "commit: $commit$dirty"
        echo "built: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
        echo "build tree: $b"
        echo "cuda: $cuda"
        echo "ucx: $ucx"
        sed -n 's/^ *\$ \(.*configure.*\)/configure: \1/p' "$b/config.log" | head -1
        local nvcc
        nvcc=$(sed -n 's/^NVCC = //p' "$b/Makefile")
        [ -n "$nvcc" ] && echo "nvcc: $nvcc, $("$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*')"
        echo "libraries (soname, copied from):"
        sed 's/^/  /' "$d/ORIGINS"
    } > "$d/MANIFEST"
    rm -f "$d/ORIGINS"
}

# ---- checks -------------------------------------------------------------------------
verify() {
    local d=$1 bad=0 f soname path
    [ -f "$d/env.sh" ] || die "$d: no env.sh (not a bundle)"
    d=$(cd "$d" && pwd)
    local cuda=0
    grep -q '^cuda: 1' "$d/MANIFEST" 2>/dev/null && cuda=1
    # required files
    local need="bin/cadrerun bin/cadre-perf bin/cadre-info lib/libcadre.so.0 MANIFEST"
    [ $cuda = 1 ] && need="$need tests/gpu/kernel_test tests/gpu/coll_gpu_test tests/gpu/ipc_gpu_test tests/gpu/gpu_peerfail tests/gpu/copy_bw lib/libcudart.so.13"
    grep -q '^ucx: 1' "$d/MANIFEST" 2>/dev/null && need="$need lib/libucp.so.0 lib/libucs.so.0 lib/libuct.so.0 lib/libucm.so.0"
    for f in $need; do
        [ -e "$d/$f" ] || { echo "$me: FAIL: $d/$f is missing"; bad=1; }
    done
    if [ -e "$d/lib/libpmix.so.2" ] && ! ls "$d"/lib/pmix/*.so >/dev/null 2>&1; then
        echo "$me: FAIL: libpmix.so.2 is bundled but not its plugins (lib/pmix)"
        bad=1
    fi
    # no static archives, no libtool files, no links (regular files travel
    # best)
    f=$(find "$d" -name '*.a' -o -name '*.la' | head -5)
    [ -z "$f" ] || { echo "$me: FAIL: static archives or libtool files: $f"; bad=1; }
    f=$(find "$d" -type l | head -5)
    [ -z "$f" ] || { echo "$me: FAIL: symbolic links: $f"; bad=1; }
    # every ELF resolves in the bundle or among the libraries the GPU machine has
    local nelf=0
    for f in $(elf_files "$d"); do
        nelf=$((nelf + 1))
        while read -r soname path; do
            if [ "$path" = not-found ]; then
                echo "$me: FAIL: ${f#"$d"/} needs $soname: not found"
                bad=1
            elif ! from_system "$soname" && [ "${path#"$d"/}" = "$path" ]; then
                echo "$me: FAIL: ${f#"$d"/} needs $soname: resolves outside the bundle ($path)"
                bad=1
            fi
        done < <(deps_of "$f" "$d")
    done
    [ $nelf -gt 0 ] || { echo "$me: FAIL: no ELF files in $d"; bad=1; }
    local kib
    kib=$(du -sk "$d" | cut -f1)
    say "$d: $nelf ELF files, $((kib / 1024)).$(( (kib % 1024) * 10 / 1024 )) MiB ($kib KiB; limit $((max_kib / 1024)) MiB)"
    if [ "$kib" -gt $max_kib ]; then
        echo "$me: FAIL: the bundle is over $((max_kib / 1024)) MiB"
        bad=1
    fi
    [ $bad = 0 ] || { echo "$me: FAILED: $d is not self-contained"; return 1; }
    say "every ELF file resolves inside the bundle (or in libc/libstdc++/libgcc_s/libcuda)"
    if [ $simulate = 1 ]; then
        simulate_device "$d" || return 1
    fi
    say "ok: $d"
}

# Runs the bundle with the system's copies of its libraries hidden, as on the
# GPU machine that has none of them.
simulate_device() {
    local d=$1
    if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
        say "simulation skipped: needs root and unshare -m (the ldd checks above still hold)"
        return 0
    fi
    local hide=() soname orig
    while read -r soname orig; do
        case $soname in
        pmix-plugins|pmix-share|ucx-module-*) hide+=("$(dirname "$orig")") ;;
        *.so*) hide+=("$orig") ;;
        esac
    done < <(sed -n 's/^  \([^ ]*\) \(\/.*\)$/\1 \2/p' "$d/MANIFEST")
    local script
    script=$(mktemp /tmp/cadre-bundle-sim.XXXXXX) || return 1
    {
        echo 'set -u'
        echo 'mount --make-rprivate / 2>/dev/null'
        for orig in "${hide[@]}"; do
            if [ -d "$orig" ]; then
                echo "mount -t tmpfs -o size=1m none '$orig' || exit 97"
            elif [ -f "$orig" ]; then
                echo "mount --bind /dev/null '$orig' || exit 97"
            fi
        done
        cat <<'EOT'
d=$1
. "$d/env.sh"
fail=0
say() { echo "device-bundle: simulated GPU machine: $*"; }
out=$(timeout 30 cadre-info 2>&1); rc=$?
if [ $rc = 0 ]; then say "cadre-info: ok"; else say "cadre-info: FAIL rc=$rc"; echo "$out" | tail -20; fail=1; fi
out=$(timeout 60 cadrerun -n 2 --timeout 50 cadre-perf allreduce -b 8 -e 64K -f 8 -n 5 -w 1 2>&1); rc=$?
if [ $rc = 0 ] && echo "$out" | grep -q 'Avg bus bandwidth\|# Out of bounds'; then
    say "cadrerun -n 2 cadre-perf allreduce (host buffers): ok"
else
    say "cadrerun -n 2 cadre-perf allreduce: FAIL rc=$rc"; echo "$out" | tail -20; fail=1
fi
if [ -e "$d/lib/libucp.so.0" ]; then
    # Two fake hosts (CADRE_HOSTID), one rank each: the ucx transport between
    # them, on the bundled UCX alone (the system's copies are hidden).
    out=$(CADRE_TRANSPORT=shm,ucx UCX_TLS=tcp UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n \
          CADRE_DEBUG=INFO CADRE_DEBUG_SUBSYS=P2P timeout 90 cadrerun -n 2 --timeout 80 \
          sh -c 'CADRE_HOSTID=h$CADRE_RANK exec cadre-perf allreduce -b 8 -e 1M -f 16 -n 5 -w 1 -c 1' 2>&1); rc=$?
    nucx=$(echo "$out" | grep -cE '^\[rank [01] INFO P2P\] peer [01]: ucx$')
    if [ $rc = 0 ] && [ "$nucx" = 2 ] && echo "$out" | grep -q '# Out of bounds values : 0 OK'; then
        say "cadrerun -n 2 on two fake hosts over ucx (bundled UCX, UCX_TLS=tcp): ok"
    else
        say "cadrerun -n 2 over ucx: FAIL rc=$rc, $nucx of 2 ranks logged ucx for their peer"
        echo "$out" | tail -20; fail=1
    fi
fi
out=$(timeout 60 cadrerun -n 1 --timeout 50 cadre-perf allreduce -G -b 8 -e 8 -n 1 -w 0 2>&1); rc=$?
if [ $rc != 0 ] && echo "$out" | grep -q 'cadre-perf: -G'; then
    say "cadre-perf -G without a GPU: refused as expected: $(echo "$out" | grep -m1 'cadre-perf: -G')"
else
    say "cadre-perf -G without a GPU: FAIL rc=$rc (expected a 'cadre-perf: -G' error)"; echo "$out" | tail -20; fail=1
fi
exit $fail
EOT
    } > "$script"
    unshare -m bash "$script" "$d"
    local rc=$?
    rm -f "$script"
    case $rc in
    0) say "simulated GPU machine (system copies hidden): ok" ;;
    97) say "simulation skipped: mounts are not allowed here (the ldd checks above still hold)" ;;
    *) echo "$me: FAIL: the bundle does not run with the system's copies of its libraries hidden"; return 1 ;;
    esac
    return 0
}

# ---- the build -------------------------------------------------------------------------
build() {
    local src=$root/src
    local cuda_dir=${CUDA_DIR:-/usr/local/cuda}
    [ -x "$cuda_dir/bin/nvcc" ] || die "no nvcc in $cuda_dir/bin (set CUDA_DIR): a CUDA build is needed"
    git -C "$top" rev-parse --git-dir >/dev/null 2>&1 || die "$top is not a git checkout"
    if [ "$root" = "$top/gpu-bundle" ]; then
        git -C "$top" check-ignore -q gpu-bundle/ || die "gpu-bundle/ is not ignored by git in $top"
    fi
    mkdir -p "$src"
    local t0=$SECONDS
    # the checkout's files as they are now, with their times (make rebuilds
    # only what changed since the last bundle)
    (cd "$top" && git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$src" -xf - ||
        die "cannot copy the checkout to $src"
    local arch=${NVCC_ARCH_FLAGS:--gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90}
    local want="--with-cuda=$cuda_dir --disable-static --prefix=/opt/cadre NVCC_ARCH_FLAGS=$arch"
    if [ ! -f "$src/config.status" ] || [ "$(cat "$src/.bundle-configure" 2>/dev/null)" != "$want" ]; then
        say "configure $want"
        (cd "$src" && ./autogen.sh >autogen.out 2>&1 &&
            ./configure --with-cuda="$cuda_dir" --disable-static --prefix=/opt/cadre \
                NVCC_ARCH_FLAGS="$arch" >configure.out 2>&1) ||
            die "configure failed: see $src/autogen.out, $src/configure.out, $src/config.log"
        grep -q '^#define HAVE_CUDA 1' "$src/config.h" || die "configure did not enable CUDA (see $src/config.log)"
        echo "$want" > "$src/.bundle-configure"
    fi
    say "make -j$jobs (log: $src/make.out)"
    (cd "$src" && make -j"$jobs" >make.out 2>&1 &&
        make -j"$jobs" -C tests gpu/kernel_test gpu/coll_gpu_test gpu/ipc_gpu_test gpu/gpu_peerfail gpu/copy_bw >>make.out 2>&1) ||
        { tail -30 "$src/make.out"; die "make failed: see $src/make.out"; }
    say "built in $((SECONDS - t0)) s"
    stage "$src" "$root/dist"
}

case $mode in
build)
    [ -z "$dist" ] || die "--out goes with --from-build"
    mkdir -p "$root" || die "cannot create $root"
    root=$(cd "$root" && pwd)
    build
    verify "$root/dist" || exit 1
    if [ "$root" = "$top/gpu-bundle" ]; then
        say "carry gpu-bundle/dist; on the GPU machine: bash tests/gpu/device-run.sh gpu-bundle/dist"
    else
        say "the bundle: $root/dist"
    fi
    ;;
stage)
    from=$(cd "$from" && pwd) || die "no directory $from"
    [ -n "$dist" ] || dist=$top/gpu-bundle/dist
    stage "$from" "$dist"
    verify "$dist" || exit 1
    ;;
verify)
    verify "$dist" || exit 1
    ;;
esac
