#!/bin/bash
# Prepares, on a Debian 12 machine with apt, what bench/gpu/run.sh needs on
# a GPU machine that has nvcc, cuBLAS, gcc and python3 + torch but no Open
# MPI, OpenBLAS or Check, and no autotools (a bare cloud or container image):
#
#   .gpu/debs/*.deb   Debian packages, fetched with `apt-get download` (never
#                     installed here); run.sh unpacks them with `dpkg -x` into
#                     a private prefix on the device, never into /
#   .gpu/cdp.tar.gz   `make dist` of this working tree (tracked and untracked,
#                     not ignored files, uncommitted edits included), so the
#                     device needs no autoconf/automake/libtool
#   .gpu/MANIFEST     what was fetched, from which tree, and the sizes
#   .gpu/data/fashion-mnist  only with `data`: the four files of Debian's
#                     dataset-fashion-mnist (30 MiB), for run.sh's train phase
#
# usage: bench/gpu/fetch.sh [debs] [dist] [data]   (default: debs dist)
# environment: GPU_DIR [.gpu at the repository root], PACKAGES [the list
# below], KEEP_TMP=1 keeps the scratch directories.
#
# .gpu/ is git-ignored: copy it to the GPU machine with the tree (rsync,
# scp); this prints its size and the tree's.
#
# The packages: the Debian 12 (bookworm) builds of what configure.ac and the
# tests need, and the shared libraries those load, found with ldd over every
# program, library and Open MPI component (the closure check below repeats
# that over the unpacked files).  Left out on purpose:
#   - libc6, libgcc-s1, libstdc++6: on any machine that has gcc and nvcc;
#   - the network transports' libraries (libucx0, libfabric1, libibverbs1,
#     libpsm2-2, libpsm-infinipath1): only Open MPI's ucx/ofi/openib/psm
#     components load them, and run.sh selects the shared-memory transports
#     (pml ob1, btl self,vader), as Debian's own openmpi-mca-params.conf does
#     for most of them;
#   - libhwloc-plugins (X11, OpenCL, libxml2, ICU), openssh-client (run.sh
#     launches with plm isolated: ranks on this node only, no ssh).
# zlib1g, libudev1, libnuma1, libatomic1, libgfortran5 and libquadmath0 are
# brought too, but run.sh uses the device's own copy of each when it has one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GPU=${GPU_DIR:-$root/.gpu}
PACKAGES=${PACKAGES:-"openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15
libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2 libopenblas0-pthread libopenblas-pthread-dev
check libsubunit0 libsubunit-dev zlib1g-dev zlib1g libudev1 libnuma1 libatomic1 libgfortran5
libquadmath0 libnl-3-200 make"}
what=${*:-debs dist}
mkdir -p "$GPU"
scratch=$(mktemp -d /tmp/cdp-gpu-fetch.XXXXXX)
[ "${KEEP_TMP:-0}" = 1 ] || trap 'rm -rf "$scratch"' EXIT

fetch_debs() {
    echo "== fetch.sh: apt-get download into $GPU/debs"
    rm -rf "$GPU/debs.new"
    mkdir -p "$GPU/debs.new"
    # apt-get download runs as _apt where it can; a root-owned 0700 scratch
    # dir makes it warn and download unsandboxed, which is harmless
    if ! (cd "$GPU/debs.new" && apt-get download $PACKAGES) >"$scratch/apt.log" 2>&1; then
        echo "apt-get download failed; once more after apt-get update:"
        tail -3 "$scratch/apt.log"
        apt-get update -q >/dev/null
        (cd "$GPU/debs.new" && apt-get download $PACKAGES)
    fi
    rm -rf "$GPU/debs"
    mv "$GPU/debs.new" "$GPU/debs"
    ls "$GPU/debs" | sed 's/^/  /'
    closure
}

# The closure check: unpack, then ldd every ELF file the build and the runs
# use; every library must resolve inside the prefix or be one the device has
# for certain (glibc's, libgcc_s, libstdc++).  Open MPI components whose
# libraries are left out are listed: run.sh does not select them.
closure() {
    local P=$scratch/prefix farm=$scratch/ld f lib bad=0
    mkdir -p "$P" "$farm"
    for f in "$GPU"/debs/*.deb; do dpkg -x "$f" "$P"; done
    # the one absolute symlink (libz.so) is relinked as run.sh does
    find "$P" -type l -lname '/*' | while read -r f; do ln -sfn "$P$(readlink "$f")" "$f"; done
    for d in "$P"/lib/x86_64-linux-gnu "$P"/usr/lib/x86_64-linux-gnu \
             "$P"/usr/lib/x86_64-linux-gnu/openblas-pthread "$P"/usr/lib/x86_64-linux-gnu/openmpi/lib; do
        for f in "$d"/*.so.*; do [ -e "$f" ] && ln -sfn "$f" "$farm/$(basename "$f")"; done
    done
    echo "== closure: ldd over the unpacked programs, libraries and Open MPI components"
    : >"$scratch/missing"
    while read -r f; do
        LD_LIBRARY_PATH=$farm ldd "$f" 2>/dev/null | awk -v f="${f#"$P"}" -v S="$scratch" '
            /=>/ && $1 !~ /^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so/ &&
                ($3 == "not" || index($3, S) != 1) { print f, $1, $3 }' >>"$scratch/missing"
    done < <(find "$P/usr/bin" "$P/usr/lib" "$P/lib" -type f \( -perm -u+x -o -name '*.so*' \) \
                 -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
    # outside the prefix is fine only for components run.sh never selects
    unused='mca_(btl_(openib|uct|ofi|usnic)|pml_(ucx|cm)|mtl_|osc_ucx|spml_ucx|atomic_ucx|scoll_ucc|coll_ucc|sshmem_ucx)|libmca_common_(ucx|ofi|verbs)|libmpi_java|liboshmem|mca_.*_psm'
    if grep -Ev "$unused" "$scratch/missing" | grep .; then
        echo "closure: the files above need libraries from outside the prefix (add their packages)"
        bad=1
    fi
    echo "  libraries left out, needed only by components run.sh does not select:"
    grep -E "$unused" "$scratch/missing" | awk '{print $2}' | sort -u | tr '\n' ' ' | fold -s -w 76 |
        sed 's/^/    /'
    echo
    # the newest glibc symbol version any of them needs: the device's glibc
    # must be at least that (Debian 12 has 2.36, Ubuntu 24.04 2.39)
    find "$P" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c \
        'head -c4 "$1" | grep -q ELF && objdump -T "$1" 2>/dev/null |
         grep -o "GLIBC_[0-9.]*" | sort -u -V | tail -1 | sed "s|\$| ${1#$2}|"' _ {} "$P" \; |
        sort -V >"$scratch/glibc_all"
    lib=$(tail -1 "$scratch/glibc_all" | cut -d' ' -f1)
    echo "  newest glibc symbol version needed: $lib (the device's glibc must be at least that), by:"
    awk -v v="$lib" '$1 == v {print "    " $2}' "$scratch/glibc_all"
    echo "glibc_needed $lib" >"$scratch/glibc"
    [ $bad = 0 ] || exit 1
}

make_dist() {
    echo "== fetch.sh: make dist of $root"
    local src=$scratch/src
    mkdir -p "$src/_dist"
    (cd "$root" && git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
    (cd "$src" && autoreconf -fi) >"$scratch/autoreconf.log" 2>&1 ||
        { cat "$scratch/autoreconf.log"; exit 1; }
    (cd "$src/_dist" && ../configure --enable-cuda=no -q) >"$scratch/configure.log" 2>&1 ||
        { tail -20 "$scratch/configure.log"; exit 1; }
    (cd "$src/_dist" && make -s dist) >"$scratch/dist.log" 2>&1 || { tail -20 "$scratch/dist.log"; exit 1; }
    cp "$src"/_dist/cdp-*.tar.gz "$GPU/cdp.tar.gz"
    echo "  $GPU/cdp.tar.gz: $(basename "$src"/_dist/cdp-*.tar.gz), $(du -h "$GPU/cdp.tar.gz" | cut -f1)"
}

copy_data() {
    local d=/usr/share/datasets/fashion-mnist
    [ -f "$d/train-images-idx3-ubyte.gz" ] ||
        { echo "fetch.sh: no $d (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
    mkdir -p "$GPU/data/fashion-mnist"
    cp "$d"/*-ubyte.gz "$GPU/data/fashion-mnist/"
    echo "== fetch.sh: $GPU/data/fashion-mnist ($(du -sh "$GPU/data" | cut -f1))"
}

for w in $what; do
    case $w in
        debs) fetch_debs ;;
        dist) make_dist ;;
        data) copy_data ;;
        *) echo "usage: bench/gpu/fetch.sh [debs] [dist] [data]" >&2; exit 2 ;;
    esac
done

tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard |
       xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carried=$(du -sb "$GPU" | cut -f1)
{
    echo "# bench/gpu/fetch.sh $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
    echo "tree $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$root" &&
         git diff --quiet HEAD 2>/dev/null || echo ' + uncommitted edits')"
    [ -f "$scratch/glibc" ] && cat "$scratch/glibc"
    [ -d "$GPU/debs" ] && (cd "$GPU/debs" && ls *.deb)
    echo "bytes_carried $carried"
    echo "bytes_tree $tree"
} >"$GPU/MANIFEST.new"
# keep the glibc line of an earlier `debs` when only `dist` ran
if [ ! -f "$scratch/glibc" ] && [ -f "$GPU/MANIFEST" ]; then
    grep '^glibc_needed' "$GPU/MANIFEST" >>"$GPU/MANIFEST.new" || true
fi
mv "$GPU/MANIFEST.new" "$GPU/MANIFEST"
echo "== sizes: $GPU $((carried / 1024)) KiB (carried), working tree $((tree / 1024)) KiB," \
     "together $(((carried + tree) / 1048576)) MiB of the 64 MiB a run call may send"
