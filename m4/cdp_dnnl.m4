# CDP_DNNL: --with-dnnl[=auto|yes|no] (default auto)
# Defines HAVE_DNNL, AM_CONDITIONAL CDP_DNNL, substitutes DNNL_LIBS.
#
# oneDNN (Debian: libdnnl-dev) runs the CPU backend's larger convolutions
# (src/cpu/kernels_conv_dnnl.c); without it they stay on im2col + OpenBLAS
# and the direct 3x3 kernels, and the bits are those of a build without it.
AC_DEFUN([CDP_DNNL], [
AC_ARG_WITH([dnnl],
  [AS_HELP_STRING([--with-dnnl@<:@=auto|yes|no@:>@],
    [convolutions through oneDNN on the CPU (default: auto, used when
     oneapi/dnnl/dnnl.h and -ldnnl are found)])],
  [cdp_with_dnnl=$withval], [cdp_with_dnnl=auto])
AS_CASE([$cdp_with_dnnl],
  [yes|no|auto], [],
  [AC_MSG_ERROR([--with-dnnl=$cdp_with_dnnl: expected yes, no or auto])])

cdp_have_dnnl=no
DNNL_LIBS=
AS_IF([test "x$cdp_with_dnnl" != xno], [
  cdp_dnnl_ok=yes
  AC_CHECK_HEADER([oneapi/dnnl/dnnl.h], [], [cdp_dnnl_ok=no])
  AS_IF([test "x$cdp_dnnl_ok" = xyes],
    [AC_CHECK_LIB([dnnl], [dnnl_engine_create], [DNNL_LIBS=-ldnnl], [cdp_dnnl_ok=no])])
  cdp_have_dnnl=$cdp_dnnl_ok
  AS_IF([test "x$cdp_have_dnnl" = xno && test "x$cdp_with_dnnl" = xyes],
    [AC_MSG_ERROR([--with-dnnl=yes: oneapi/dnnl/dnnl.h or -ldnnl not found (install the Debian package libdnnl-dev)])])
])
AS_IF([test "x$cdp_have_dnnl" = xyes],
  [AC_DEFINE([HAVE_DNNL], [1], [Define to 1 when convolutions may run through oneDNN])])
AM_CONDITIONAL([CDP_DNNL], [test "x$cdp_have_dnnl" = xyes])
AC_SUBST([DNNL_LIBS])
])
