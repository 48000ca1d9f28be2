# CDP_CUDA: --enable-cuda[=auto|yes|no], --with-cuda=DIR, --with-cuda-arch=LIST
# Defines HAVE_CUDA, AM_CONDITIONAL CDP_CUDA, substitutes NVCC, NVCCFLAGS,
# CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, NVCC_GENCODE.
#
# NVCC_GENCODE holds one SASS target per listed compute capability plus PTX
# for the highest one, so that GPUs newer than the list still run (the driver
# compiles the PTX at first use).
AC_DEFUN([CDP_CUDA], [
AC_ARG_VAR([NVCC], [CUDA compiler])
AC_ARG_VAR([NVCCFLAGS], [extra flags for NVCC])
AC_ARG_ENABLE([cuda],
  [AS_HELP_STRING([--enable-cuda@<:@=auto|yes|no@:>@],
    [build the CUDA + cuBLAS backend (default: no; auto builds it when nvcc is found)])],
  [cdp_enable_cuda=$enableval], [cdp_enable_cuda=no])
AS_CASE([$cdp_enable_cuda],
  [yes|no|auto], [],
  [AC_MSG_ERROR([--enable-cuda=$cdp_enable_cuda: expected yes, no or auto])])
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit prefix (default: /usr/local/cuda)])],
  [cdp_cuda_dir=$withval], [cdp_cuda_dir=/usr/local/cuda])
AS_IF([test "x$cdp_cuda_dir" = xyes || test "x$cdp_cuda_dir" = x],
  [cdp_cuda_dir=/usr/local/cuda])
AS_IF([test "x$cdp_cuda_dir" = xno], [cdp_enable_cuda=no])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=LIST],
    [comma-separated compute capabilities, e.g. 80,90 (default: 80,90: A100
     and H100, plus PTX for newer GPUs)])],
  [cdp_cuda_arch=$withval], [cdp_cuda_arch=80,90])

cdp_have_cuda=no
AS_IF([test "x$cdp_enable_cuda" != xno], [
  AS_IF([test "x$NVCC" = x],
    [AC_PATH_PROG([NVCC], [nvcc], [], [$cdp_cuda_dir/bin$PATH_SEPARATOR$PATH])])
  AS_IF([test "x$NVCC" != x && test -x "$NVCC"], [
    cdp_cuda_libdir=$cdp_cuda_dir/lib64
    AS_IF([test -d "$cdp_cuda_libdir"], [],
      [test -d "$cdp_cuda_dir/lib"], [cdp_cuda_libdir=$cdp_cuda_dir/lib])
    CUDA_CPPFLAGS="-I$cdp_cuda_dir/include"
    CUDA_LDFLAGS="-L$cdp_cuda_libdir -Wl,-rpath,$cdp_cuda_libdir"
    CUDA_LIBS="-lcublas -lcudart"
    save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
    cdp_cuda_ok=yes
    AC_CHECK_HEADER([cuda_runtime_api.h], [], [cdp_cuda_ok=no])
    AC_CHECK_HEADER([cublas_v2.h], [], [cdp_cuda_ok=no])
    AC_CHECK_LIB([cudart], [cudaMalloc], [:], [cdp_cuda_ok=no])
    AC_CHECK_LIB([cublas], [cublasCreate_v2], [:], [cdp_cuda_ok=no], [-lcudart])
    CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
    cdp_have_cuda=$cdp_cuda_ok
  ])
  AS_IF([test "x$cdp_have_cuda" = xno && test "x$cdp_enable_cuda" = xyes],
    [AC_MSG_ERROR([--enable-cuda: nvcc, cudart or cuBLAS not found under $cdp_cuda_dir (install the CUDA Toolkit or give --with-cuda=DIR / NVCC=...)])])
])

cdp_nvcc_gencode=
AS_IF([test "x$cdp_have_cuda" = xyes], [
  cdp_cuda_last=
  for cdp_a in `echo "$cdp_cuda_arch" | tr ',' ' '`; do
    # accept 90, sm_90, compute_90, 90a, 100f
    cdp_a=`echo "$cdp_a" | sed 's/^sm_//; s/^compute_//'`
    AS_CASE([$cdp_a],
      [@<:@!1-9@:>@*|*@<:@!0-9af@:>@*|?|*@<:@af@:>@?*],
      [AC_MSG_ERROR([--with-cuda-arch: '$cdp_a' is not a compute capability (expected a list such as 80,90)])])
    cdp_nvcc_gencode="$cdp_nvcc_gencode -gencode arch=compute_$cdp_a,code=sm_$cdp_a"
    cdp_cuda_last=$cdp_a
  done
  AS_IF([test "x$cdp_cuda_last" = x],
    [AC_MSG_ERROR([--with-cuda-arch: empty list (expected e.g. 80,90)])])
  cdp_nvcc_gencode="$cdp_nvcc_gencode -gencode arch=compute_$cdp_cuda_last,code=compute_$cdp_cuda_last"
])

AS_IF([test "x$cdp_have_cuda" = xyes], [
  # nvcc must accept the architectures (recent toolkits drop old ones) and
  # work with the host compiler it finds.
  AC_MSG_CHECKING([whether $NVCC compiles for compute capabilities $cdp_cuda_arch])
  cat > conftest.cu <<_CDPEOF
#include <cuda_runtime.h>
__global__ void cdp_conftest_kernel(float *x) { x@<:@threadIdx.x@:>@ *= 2.0f; }
int main(void) { cdp_conftest_kernel<<<1, 1>>>(0); return 0; }
_CDPEOF
  AS_IF([$NVCC $cdp_nvcc_gencode $NVCCFLAGS -Xcompiler=-fPIC -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     cdp_have_cuda=no
     AS_IF([test "x$cdp_enable_cuda" = xyes],
       [AC_MSG_ERROR([$NVCC cannot compile for --with-cuda-arch=$cdp_cuda_arch (see config.log; '$NVCC --list-gpu-arch' lists what this toolkit supports)])])])
  rm -f conftest.cu conftest.$OBJEXT
])
AS_IF([test "x$cdp_have_cuda" = xyes],
  [AC_DEFINE([HAVE_CUDA], [1], [Define to 1 when the CUDA backend is built])],
  [CUDA_CPPFLAGS=; CUDA_LDFLAGS=; CUDA_LIBS=])
AM_CONDITIONAL([CDP_CUDA], [test "x$cdp_have_cuda" = xyes])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([NVCC_GENCODE], [$cdp_nvcc_gencode])
])
