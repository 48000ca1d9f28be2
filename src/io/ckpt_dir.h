/* Internal to src/io: the directory of a checkpoint's files, shared by the
 * listing of its steps (checkpoint.c) and the removal of its stale
 * temporaries (stale_tmp.c). */
#ifndef CDP_IO_CKPT_DIR_H
#define CDP_IO_CKPT_DIR_H

#include <dirent.h>
#include <stddef.h>

/* Opens the directory of stem's files (dir: its path, *base: stem's last
 * component) into *d: 0 (*d NULL when the directory does not exist), or -1
 * with err. */
int cdp_ckpt_dir_open(const char *stem, char *dir, size_t dirlen, const char **base, DIR **d,
                      char *err, size_t errlen);

#endif
