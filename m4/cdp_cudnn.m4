# CDP_CUDNN: --with-cudnn[=auto|yes|no|DIR] (default auto), after CDP_CUDA.
# When the CUDA backend is built and cuDNN is found (cudnn.h and libcudnn
# under the CUDA prefix, or under DIR: DIR/include and DIR/lib or lib64, as
# the nvidia-cudnn pip wheels lay it out), adds -DCDP_HAVE_CUDNN=1 and its
# paths to CUDA_CPPFLAGS, CUDA_LDFLAGS (with an rpath) and CUDA_LIBS.
# src/gpu/conv_cudnn.cu then runs the convolutions through cuDNN.  The wheels
# ship only libcudnn.so.9: it is linked by that name when -lcudnn fails.
AC_DEFUN([CDP_CUDNN], [
AC_ARG_WITH([cudnn],
  [AS_HELP_STRING([--with-cudnn@<:@=auto|yes|no|DIR@:>@],
    [CUDA backend: convolutions through cuDNN (default: auto, used when
     cudnn.h and libcudnn are found under the CUDA prefix or DIR)])],
  [cdp_with_cudnn=$withval], [cdp_with_cudnn=auto])
cdp_cudnn_dir=
AS_CASE([$cdp_with_cudnn],
  [yes|no|auto], [],
  [/*], [cdp_cudnn_dir=$cdp_with_cudnn; cdp_with_cudnn=yes],
  [AC_MSG_ERROR([--with-cudnn=$cdp_with_cudnn: expected yes, no, auto or an absolute directory])])

cdp_have_cudnn=no
AS_IF([test "x$cdp_have_cuda" = xyes && test "x$cdp_with_cudnn" != xno], [
  cdp_cudnn_cppflags=
  cdp_cudnn_ldflags=
  AS_IF([test "x$cdp_cudnn_dir" != x], [
    cdp_cudnn_cppflags="-I$cdp_cudnn_dir/include"
    cdp_cudnn_libdir=$cdp_cudnn_dir/lib
    AS_IF([test -d "$cdp_cudnn_dir/lib64"], [cdp_cudnn_libdir=$cdp_cudnn_dir/lib64])
    cdp_cudnn_ldflags="-L$cdp_cudnn_libdir -Wl,-rpath,$cdp_cudnn_libdir"
  ])
  save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS $cdp_cudnn_cppflags"
  LDFLAGS="$LDFLAGS $CUDA_LDFLAGS $cdp_cudnn_ldflags"
  cdp_cudnn_lib=
  AC_CHECK_HEADER([cudnn.h], [
    for cdp_l in -lcudnn -l:libcudnn.so.9; do
      AC_MSG_CHECKING([for cudnnCreate with $cdp_l])
      LIBS="$cdp_l $CUDA_LIBS $save_LIBS"
      AC_LINK_IFELSE([AC_LANG_CALL([], [cudnnCreate])],
        [AC_MSG_RESULT([yes]); cdp_cudnn_lib=$cdp_l; break],
        [AC_MSG_RESULT([no])])
    done])
  CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
  AS_IF([test "x$cdp_cudnn_lib" != x], [
    cdp_have_cudnn=yes
    CUDA_CPPFLAGS="$CUDA_CPPFLAGS $cdp_cudnn_cppflags -DCDP_HAVE_CUDNN=1"
    CUDA_LDFLAGS="$CUDA_LDFLAGS $cdp_cudnn_ldflags"
    CUDA_LIBS="$cdp_cudnn_lib $CUDA_LIBS"
  ])
])
AS_IF([test "x$cdp_have_cudnn" = xno && test "x$cdp_with_cudnn" = xyes],
  [AC_MSG_ERROR([--with-cudnn: cudnn.h or libcudnn not found (or the CUDA backend is not built)])])
AS_IF([test "x$cdp_have_cudnn" = xyes],
  [AC_DEFINE([HAVE_CUDNN], [1], [Define to 1 when the CUDA backend's convolutions may run through cuDNN])])
])
