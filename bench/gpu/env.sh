# shellcheck shell=bash
# The private prefix that bench/gpu/run.sh builds and runs cdp with; sourced,
# not run:
#     . bench/gpu/env.sh && gpu_env      (then mpicc, mpirun, ... are there)
#
# gpu_env unpacks .gpu/debs/*.deb (bench/gpu/fetch.sh) into $GPU_WORK/prefix
# with `dpkg -x` (a few lines of Python where dpkg-deb is missing), never
# into /, once per set of .debs, and exports:
#   PATH             $GPU_WORK/bin first: mpicc, mpirun, mpiexec, ompi_info,
#                    orterun, orted of the prefix (make too, where the
#                    machine has none)
#   LD_LIBRARY_PATH  $GPU_WORK/ld first: links to the prefix's shared
#                    libraries, except zlib, libudev, libnuma, libatomic,
#                    libgfortran and libquadmath where the machine has its own
#   OPAL_PREFIX      the prefix's /usr: Open MPI's wrappers, mpirun and its
#                    components find themselves there (it is relocatable);
#                    OPAL_SYSCONFDIR its etc/openmpi; PMIX_PREFIX, PMIX_LIBDIR,
#                    PMIX_PKGLIBDIR, ... the same for Debian's libpmix2
#                    (its plugins); HWLOC_PLUGINS_PATH an empty directory
#   OMPI_MCA_*       ranks on this node only, without ssh (plm isolated), over
#                    shared memory (pml ob1, btl self,vader), the components
#                    whose transports were left out never opened; run as root
#   CDP_CONFIGURE    (an array) the configure arguments that take MPI
#                    (CC=mpicc), OpenBLAS, Check and zlib from the prefix
#                    without pkg-config (OPENBLAS_CFLAGS=..., OPENBLAS_LIBS=...
#                    etc.: configure then asks pkg-config nothing, and the
#                    .pc files' absolute /usr paths do not matter); by hand:
#                    PKG_CONFIG_SYSROOT_DIR=$GPU_PREFIX PKG_CONFIG_PATH=...
#   GPU_PREFIX       the prefix
# CDP_GPU_MPI=system keeps a machine's own mpicc/mpirun instead (the prefix
# still gives OpenBLAS, Check and zlib).
#
# Environment: GPU_DIR [.gpu at the repository root], GPU_WORK [/tmp/cdp-gpu].

gpu_env() {
    local here root deb d f n stamp want
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    root=$(cd "$here/../.." && pwd)
    GPU_DIR=${GPU_DIR:-$root/.gpu}
    GPU_WORK=${GPU_WORK:-/tmp/cdp-gpu}
    GPU_PREFIX=$GPU_WORK/prefix
    export GPU_DIR GPU_WORK GPU_PREFIX
    local P=$GPU_PREFIX
    if ! ls "$GPU_DIR"/debs/*.deb >/dev/null 2>&1; then
        echo "gpu_env: no $GPU_DIR/debs/*.deb (run bench/gpu/fetch.sh on a Debian machine first)" >&2
        return 1
    fi
    want=$(cd "$GPU_DIR/debs" && ls -l --time-style=+ -- *.deb | awk '{print $5, $NF}' | cksum)
    stamp=$(cat "$GPU_WORK/prefix.stamp" 2>/dev/null || true)
    if [ "$stamp" != "$want" ] || [ ! -d "$P/usr" ]; then
        rm -rf "${P:?}" "${GPU_WORK:?}/ld" "${GPU_WORK:?}/bin" "${GPU_WORK:?}/prefix.stamp"
        mkdir -p "$P"
        for deb in "$GPU_DIR"/debs/*.deb; do
            if command -v dpkg-deb >/dev/null 2>&1; then
                dpkg-deb -x "$deb" "$P" || return 1
            else
                gpu_deb_extract "$deb" "$P" || return 1
            fi
        done
        # relocate absolute symbolic links (zlib1g-dev's libz.so)
        find "$P" -type l -lname '/*' | while read -r f; do
            ln -sfn "$P$(readlink "$f")" "$f"
        done
        mkdir -p "$GPU_WORK/ld" "$GPU_WORK/bin"
        for d in "$P"/lib/x86_64-linux-gnu "$P"/usr/lib/x86_64-linux-gnu \
                 "$P"/usr/lib/x86_64-linux-gnu/openblas-pthread "$P"/usr/lib/x86_64-linux-gnu/openmpi/lib; do
            for f in "$d"/*.so.*; do
                [ -e "$f" ] || continue
                n=$(basename "$f")
                case $n in
                    libblas.so.3|liblapack.so.3) continue ;;   # cdp links libopenblas.so.0 only
                    libz.so.1|libudev.so.1|libnuma.so.1|libatomic.so.1|libgfortran.so.5|libquadmath.so.0)
                        # the machine's own, when it has one
                        if /sbin/ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$n "; then continue; fi ;;
                esac
                ln -sfn "$f" "$GPU_WORK/ld/$n"
            done
        done
        for n in mpicc mpicxx mpirun mpiexec; do
            ln -sfn "$P/usr/bin/$n.openmpi" "$GPU_WORK/bin/$n"
        done
        for n in ompi_info orterun orted opal_wrapper; do
            ln -sfn "$P/usr/bin/$n" "$GPU_WORK/bin/$n"
        done
        mkdir -p "$GPU_WORK/tools"
        command -v make >/dev/null 2>&1 || ln -sfn "$P/usr/bin/make" "$GPU_WORK/tools/make"
        echo "$want" >"$GPU_WORK/prefix.stamp"
    fi

    local lib=$P/usr/lib/x86_64-linux-gnu
    export LD_LIBRARY_PATH=$GPU_WORK/ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    if [ "${CDP_GPU_MPI:-prefix}" = system ]; then
        export PATH=$PATH:$GPU_WORK/tools
    else
        export PATH=$GPU_WORK/bin:$PATH:$GPU_WORK/tools
        export OPAL_PREFIX=$P/usr OPAL_SYSCONFDIR=$P/etc/openmpi
        # PMIx (Debian's libpmix2, outside Open MPI's prefix) has its own
        local x=$lib/pmix2
        export PMIX_PREFIX=$x PMIX_LIBDIR=$x/lib PMIX_PKGLIBDIR=$x/lib/pmix PMIX_DATADIR=$x/share \
               PMIX_PKGDATADIR=$x/share/pmix PMIX_SYSCONFDIR=$x/share
        # hwloc's plugins (X11, OpenCL, PCI) are not brought: none, here too
        mkdir -p "$GPU_WORK/no-hwloc-plugins"
        export HWLOC_PLUGINS_PATH=$GPU_WORK/no-hwloc-plugins
        # what Debian's /etc/openmpi/openmpi-mca-params.conf would say, and
        # more: no ssh, shared memory only, no transports left out
        export OMPI_MCA_plm=isolated
        export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_osc=sm,rdma
        export OMPI_MCA_btl_base_warn_component_unused=0
        export OMPI_MCA_btl_vader_single_copy_mechanism=none
        export OMPI_MCA_mca_base_component_show_load_errors=0
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1
    CDP_CONFIGURE=(
        "OPENBLAS_CFLAGS=-I$P/usr/include/x86_64-linux-gnu/openblas-pthread"
        "OPENBLAS_LIBS=-L$lib/openblas-pthread -lopenblas"
        "CHECK_CFLAGS=-I$P/usr/include -pthread"
        "CHECK_LIBS=-L$lib -lcheck_pic -lrt -lm -lsubunit"
        "ZLIB_CFLAGS=-I$P/usr/include"
        "ZLIB_LIBS=-L$lib -lz"
    )
    [ "${CDP_GPU_MPI:-prefix}" = system ] || CDP_CONFIGURE+=("CC=$GPU_WORK/bin/mpicc" "MPICC=$GPU_WORK/bin/mpicc"
                                                              "MPIRUN=$GPU_WORK/bin/mpirun")
}

# gpu_deb_extract DEB DIR: dpkg -x without dpkg (an ar archive holding
# data.tar.{xz,gz,zst}; zst needs the zstd program)
gpu_deb_extract() {
    python3 - "$1" "$2" <<'PYEOF'
import io, os, subprocess, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
assert data[:8] == b"!<arch>\n", deb + ": not a .deb"
off = 8
while off + 60 <= len(data):
    name = data[off:off + 16].decode().strip().rstrip("/")
    size = int(data[off + 48:off + 58].decode().strip())
    body = data[off + 60:off + 60 + size]
    off += 60 + size + (size & 1)
    if name.startswith("data.tar"):
        if name.endswith(".zst"):
            body = subprocess.run(["zstd", "-dc"], input=body, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(body)) as t:
            t.extractall(dest, filter="tar") if hasattr(tarfile, "data_filter") else t.extractall(dest)
        break
else:
    sys.exit(deb + ": no data.tar member")
PYEOF
}
