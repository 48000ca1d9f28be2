# CDP_IMAGES: --with-turbojpeg[=auto|yes|no] and --with-png[=auto|yes|no]
# (default auto).  Defines HAVE_TURBOJPEG / HAVE_LIBPNG and substitutes
# TURBOJPEG_LIBS / PNG_LIBS.
#
# The decoders of --data folder (src/io/image_decode.c): JPEG through
# libjpeg-turbo's TurboJPEG API (Debian: libturbojpeg0-dev), PNG through
# libpng (Debian: libpng-dev).  Without them the build has no such format and
# --data folder refuses files of it, naming the package.
AC_DEFUN([CDP_IMAGE_LIB], [
AC_ARG_WITH([$1],
  [AS_HELP_STRING([--with-$1@<:@=auto|yes|no@:>@], [$5 (default: auto)])],
  [cdp_with_$1=$withval], [cdp_with_$1=auto])
AS_CASE([$cdp_with_$1],
  [yes|no|auto], [],
  [AC_MSG_ERROR([--with-$1=$cdp_with_$1: expected yes, no or auto])])
cdp_have_$1=no
$4=
AS_IF([test "x$cdp_with_$1" != xno], [
  cdp_have_$1=yes
  AC_CHECK_HEADER([$2], [], [cdp_have_$1=no])
  AS_IF([test "x$cdp_have_$1" = xyes],
    [AC_CHECK_LIB([$3], [$6], [$4=-l$3], [cdp_have_$1=no])])
  AS_IF([test "x$cdp_have_$1" = xno && test "x$cdp_with_$1" = xyes],
    [AC_MSG_ERROR([--with-$1=yes: $2 or -l$3 not found (install the Debian package $7)])])
])
AC_SUBST([$4])
])

AC_DEFUN([CDP_IMAGES], [
CDP_IMAGE_LIB([turbojpeg], [turbojpeg.h], [turbojpeg], [TURBOJPEG_LIBS],
  [JPEG decoding for --data folder through libjpeg-turbo], [tjDecompress2], [libturbojpeg0-dev])
AS_IF([test "x$cdp_have_turbojpeg" = xyes],
  [AC_DEFINE([HAVE_TURBOJPEG], [1], [Define to 1 when JPEG files are decoded with libturbojpeg])])
CDP_IMAGE_LIB([png], [png.h], [png16], [PNG_LIBS],
  [PNG decoding for --data folder through libpng], [png_image_begin_read_from_memory], [libpng-dev])
AS_IF([test "x$cdp_have_png" = xyes],
  [AC_DEFINE([HAVE_LIBPNG], [1], [Define to 1 when PNG files are decoded with libpng])])
])
