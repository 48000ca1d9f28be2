# CDP_CUDA: --enable-cuda[=auto|yes|no], --with-cuda=DIR, --with-cuda-arch=LIST
# Defines HAVE_CUDA, AM_CONDITIONAL CDP_CUDA, substitutes NVCC, NVCCFLAGS,
# CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS.
AC_DEFUN([CDP_CUDA], [
AC_ARG_VAR([NVCC], [CUDA compiler])
AC_ARG_VAR([NVCCFLAGS], [extra flags for NVCC])
AC_ARG_ENABLE([cuda],
  [AS_HELP_STRING([--enable-cuda@<:@=auto|yes|no@:>@],
    [build the CUDA + cuBLAS backend (default: no; auto builds it when nvcc is found)])],
  [cdp_enable_cuda=$enableval], [cdp_enable_cuda=no])
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit prefix (default: /usr/local/cuda)])],
  [cdp_cuda_dir=$withval], [cdp_cuda_dir=/usr/local/cuda])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=LIST],
    [comma-separated compute capabilities, e.g. 80,90 (default: 80,90)])],
  [cdp_cuda_arch=$withval], [cdp_cuda_arch=80,90])

cdp_have_cuda=no
AS_IF([test "x$cdp_enable_cuda" != xno], [
  AS_IF([test "x$NVCC" = x],
    [AC_PATH_PROG([NVCC], [nvcc], [], [$cdp_cuda_dir/bin$PATH_SEPARATOR$PATH])])
  AS_IF([test "x$NVCC" != x && test -x "$NVCC"], [
    CUDA_CPPFLAGS="-I$cdp_cuda_dir/include"
    CUDA_LDFLAGS="-L$cdp_cuda_dir/lib64 -Wl,-rpath,$cdp_cuda_dir/lib64"
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
for cdp_a in `echo "$cdp_cuda_arch" | tr ',' ' '`; do
  cdp_nvcc_gencode="$cdp_nvcc_gencode -gencode arch=compute_$cdp_a,code=sm_$cdp_a"
done
AS_IF([test "x$cdp_have_cuda" = xyes],
  [AC_DEFINE([HAVE_CUDA], [1], [Define to 1 when the CUDA backend is built])])
AM_CONDITIONAL([CDP_CUDA], [test "x$cdp_have_cuda" = xyes])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([NVCC_GENCODE], [$cdp_nvcc_gencode])
])
