/* The ImageFolder layout: finding the classes and files, checking and
 * decoding them; see io/image_folder.h. */
#include "io/image_folder.h"
#include "io/batch.h"
#include "io/image_decode.h"
#include "io/safetensors.h"
#include "io/transforms.h"
#include "util/rng.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deeper folders inside a class folder are refused (a link loop). */
#define MAX_DEPTH 32
/* Largest image file read. */
#define MAX_FILE_BYTES ((int64_t)1 << 30)

#define set_err cdp_data_err

/* ------------------------------------------------------------ the layout */

/* A growing list of strings. */
typedef struct strlist {
    char **s;
    size_t n, cap;
} strlist;

static int strlist_add(strlist *l, const char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **g = realloc(l->s, cap * sizeof *g);
        if (!g)
            return -1;
        l->s = g;
        l->cap = cap;
    }
    if (!(l->s[l->n] = strdup(s)))
        return -1;
    l->n++;
    return 0;
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->s[i]);
    free(l->s);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* torchvision's IMG_EXTENSIONS, compared without case. */
static int has_image_extension(const char *name)
{
    static const char *const ext[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm",
                                      ".tif", ".tiff", ".webp"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        const size_t e = strlen(ext[i]);
        if (n >= e && strcasecmp(name + n - e, ext[i]) == 0)
            return 1;
    }
    return 0;
}

/* Whether dir/name is a directory, links followed (os.DirEntry.is_dir()). */
static int is_dir_at(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The entries of dir, sorted; dirs: only the directories, else only the
 * rest (os.walk's split).  0, or -1 with err. */
static int list_dir(const char *dir, int dirs, strlist *out, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        set_err(err, errlen, "%s: cannot open the folder: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char path[4096];
    int rc = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (w < 0 || (size_t)w >= sizeof path) {
            set_err(err, errlen, "%.200s/%.200s...: path too long", dir, e->d_name);
            rc = -1;
            break;
        }
        if (is_dir_at(path) == dirs && strlist_add(out, e->d_name) != 0) {
            set_err(err, errlen, "%s: out of memory listing the folder", dir);
            rc = -1;
            break;
        }
    }
    closedir(d);
    if (rc == 0)
        qsort(out->s, out->n, sizeof *out->s, cmp_str);
    return rc;
}

/* Every folder under dir (dir included, links followed) into folders:
 * sorted afterwards, they are the roots of sorted(os.walk(dir)), whose
 * files ImageFolder takes root by root, each root's names sorted. */
static int walk_class(const char *dir, int depth, strlist *folders, char *err, size_t errlen)
{
    if (depth > MAX_DEPTH) {
        set_err(err, errlen, "%s: folders nested more than %d deep (a symbolic link loop?)",
                dir, MAX_DEPTH);
        return -1;
    }
    if (strlist_add(folders, dir) != 0) {
        set_err(err, errlen, "%s: out of memory", dir);
        return -1;
    }
    strlist subs = {0};
    if (list_dir(dir, 1, &subs, err, errlen) != 0)
        return -1;
    char path[4096];
    int rc = 0;
    for (size_t i = 0; i < subs.n && rc == 0; i++) {
        /* list_dir checked that the path fits */
        if (snprintf(path, sizeof path, "%s/%s", dir, subs.s[i]) < (int)sizeof path)
            rc = walk_class(path, depth + 1, folders, err, errlen);
    }
    strlist_free(&subs);
    return rc;
}

/* Appends the image files of class folder cdir (label `label`) to files
 * and labels.  0, or -1 with err. */
static int class_files(const char *cdir, int32_t label, strlist *files, int32_t **labels,
                       size_t *lcap, char *err, size_t errlen)
{
    strlist folders = {0}, names = {0};
    int rc = walk_class(cdir, 0, &folders, err, errlen);
    if (rc == 0)
        qsort(folders.s, folders.n, sizeof *folders.s, cmp_str);
    const size_t before = files->n;
    char path[4096];
    for (size_t f = 0; f < folders.n && rc == 0; f++) {
        rc = list_dir(folders.s[f], 0, &names, err, errlen);
        for (size_t i = 0; i < names.n && rc == 0; i++) {
            if (!has_image_extension(names.s[i]))
                continue;
            int w = snprintf(path, sizeof path, "%s/%s", folders.s[f], names.s[i]);
            if (w < 0 || (size_t)w >= sizeof path) {
                set_err(err, errlen, "%.200s/%.200s...: path too long", folders.s[f], names.s[i]);
                rc = -1;
            } else if (strlist_add(files, path) != 0) {
                set_err(err, errlen, "%s: out of memory", cdir);
                rc = -1;
            }
        }
        strlist_free(&names);
    }
    strlist_free(&folders);
    if (rc == 0 && files->n == before) {
        set_err(err, errlen, "%s: no image files in this class folder (ImageFolder takes "
                ".jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp, in any case)", cdir);
        rc = -1;
    }
    if (rc == 0 && files->n > *lcap) {
        size_t cap = files->cap;
        int32_t *g = realloc(*labels, cap * sizeof *g);
        if (!g) {
            set_err(err, errlen, "%s: out of memory", cdir);
            return -1;
        }
        *labels = g;
        *lcap = cap;
    }
    for (size_t i = before; rc == 0 && i < files->n; i++)
        (*labels)[i] = label;
    return rc;
}

/* The files and labels of split root (DIR/train or DIR/val) whose classes
 * must be `classes` when given (else they are found and returned). */
static int scan_split(const char *root, strlist *classes, int find_classes, strlist *files,
                      int32_t **labels, char *err, size_t errlen)
{
    struct stat st;
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "%s: %s (an ImageFolder layout needs DIR/train/CLASS/... and "
                "DIR/val/CLASS/...)", root, stat(root, &st) ? strerror(errno) : "not a folder");
        return -1;
    }
    strlist found = {0};
    if (list_dir(root, 1, &found, err, errlen) != 0)
        return -1;
    int rc = 0;
    if (found.n == 0) {
        set_err(err, errlen, "%s: no class folders in it", root);
        rc = -1;
    } else if (!find_classes) {
        int same = found.n == classes->n;
        for (size_t i = 0; same && i < found.n; i++)
            same = strcmp(found.s[i], classes->s[i]) == 0;
        if (!same) {
            set_err(err, errlen, "%s: %zu class folders, not the %zu of the training set "
                    "(the validation set must have the same classes)", root, found.n,
                    classes->n);
            rc = -1;
        }
    } else if (found.n > INT32_MAX) {
        set_err(err, errlen, "%s: too many class folders", root);
        rc = -1;
    }
    size_t lcap = 0;
    char path[4096];
    for (size_t c = 0; c < found.n && rc == 0; c++) {
        snprintf(path, sizeof path, "%s/%s", root, found.s[c]);
        rc = class_files(path, (int32_t)c, files, labels, &lcap, err, errlen);
    }
    if (rc == 0 && find_classes) {
        *classes = found;
        return 0;
    }
    strlist_free(&found);
    return rc;
}

/* ---------------------------------------------------------- the files */

/* The first `limit` bytes of the file at path (0: all of them; *len of
 * them, malloc'd; *size: the file's), or NULL with "PATH: problem" in err. */
static uint8_t *read_file(const char *path, size_t limit, size_t *len, int64_t *size,
                          char *err, size_t errlen)
{
    int fd = cdp_open_regular(path, err, errlen);
    if (fd < 0)
        return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) != 0 || st.st_size > MAX_FILE_BYTES) {
        set_err(err, errlen, "%s: %s", path, st.st_size > MAX_FILE_BYTES
                ? "larger than 1 GiB, not read" : strerror(errno));
        goto fail;
    }
    *size = st.st_size;
    const size_t want = limit && limit < (size_t)st.st_size ? limit : (size_t)st.st_size;
    buf = malloc(want ? want : 1);
    if (!buf) {
        set_err(err, errlen, "%s: out of memory for %lld bytes", path, (long long)st.st_size);
        goto fail;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            set_err(err, errlen, "%s: read error: %s", path, r < 0 ? strerror(errno)
                    : "the file shrank while it was read");
            goto fail;
        }
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    return buf;
fail:
    free(buf);
    close(fd);
    return NULL;
}

/* A header is looked for in this many first bytes of a file, then, if
 * not found there, in the whole file: opening a folder reads a fraction of
 * each training file. */
#define PROBE_BYTES ((size_t)16 << 10)

/* Reads and decodes path into im (probe_only: its size only).  0, or -1
 * with "PATH: problem". */
static int load_image(const char *path, cdp_image *im, int probe_only, char *err, size_t errlen)
{
    size_t len = 0;
    int64_t size = 0;
    memset(im, 0, sizeof *im);
    uint8_t *buf = read_file(path, probe_only ? PROBE_BYTES : 0, &len, &size, err, errlen);
    if (!buf)
        return -1;
    char why[512];
    int rc = probe_only ? cdp_image_probe(buf, len, &im->width, &im->height, why, sizeof why)
                        : cdp_image_decode(buf, len, im, why, sizeof why);
    if (rc != 0 && probe_only && (int64_t)len < size) {
        free(buf);
        if (!(buf = read_file(path, 0, &len, &size, err, errlen)))
            return -1;
        rc = cdp_image_probe(buf, len, &im->width, &im->height, why, sizeof why);
    }
    free(buf);
    if (rc != 0)
        set_err(err, errlen, "%s: %s", path, why);
    return rc;
}

/* The validation image at path: Resize(R), CenterCrop(S), CHW into out. */
static int val_image(const char *path, int S, int R, uint8_t *out, char *err, size_t errlen)
{
    cdp_image im;
    if (load_image(path, &im, 0, err, errlen) != 0)
        return -1;
    int rc = cdp_resize_center_crop(im.rgb, im.width, im.height, R, S, out);
    if (rc != 0)
        set_err(err, errlen, "%s: out of memory resizing a %d x %d image", path, im.width,
                im.height);
    cdp_image_free(&im);
    return rc;
}

/* Checks every file on the OpenMP threads: a training file's header, or
 * with skip the whole training file; a validation file is decoded into
 * pixels.  Then either the first failure (lowest index) is the
 * error, or, with skip, the failures are dropped from files and labels
 * (and from pixels) and counted.  0, or -1 with err. */
static int check_files(strlist *files, int32_t *labels, int S, int R, uint8_t *pixels,
                       int skip, int64_t *skipped, char *err, size_t errlen)
{
    const int64_t n = (int64_t)files->n;
    const size_t dim = (size_t)3 * S * S;
    char **errs = calloc((size_t)n, sizeof *errs);   /* a failure's line, else NULL */
    if (!errs) {
        set_err(err, errlen, "out of memory checking %lld image files", (long long)n);
        return -1;
    }
    int oom = 0;
    #pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; i++) {
        cdp_image im;
        char e[512] = "";
        if (pixels)
            val_image(files->s[i], S, R, pixels + (size_t)i * dim, e, sizeof e);
        else if (load_image(files->s[i], &im, !skip, e, sizeof e) == 0)
            cdp_image_free(&im);
        if (e[0] && !(errs[i] = strdup(e))) {
            #pragma omp atomic write
            oom = 1;
        }
    }
    int64_t kept = 0, bad = 0, first = -1;
    for (int64_t i = 0; i < n && first < 0; i++)
        if (errs[i] && !skip)
            first = i;
    if (oom || first >= 0) {
        if (oom)
            set_err(err, errlen, "out of memory checking %lld image files", (long long)n);
        else
            set_err(err, errlen, "%s (a damaged file can be left out with "
                    "--data folder:DIR:bad=skip)", errs[first]);
        for (int64_t i = 0; i < n; i++)
            free(errs[i]);
        free(errs);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        if (errs[i]) {
            free(errs[i]);
            free(files->s[i]);
            bad++;
            continue;
        }
        files->s[kept] = files->s[i];
        labels[kept] = labels[i];
        if (pixels && kept != i)
            memcpy(pixels + (size_t)kept * dim, pixels + (size_t)i * dim, dim);
        kept++;
    }
    free(errs);
    files->n = (size_t)kept;
    *skipped += bad;
    if (kept == 0) {
        set_err(err, errlen, "all %lld image files were left out as unreadable (bad=skip)",
                (long long)n);
        return -1;
    }
    return 0;
}

/* CRC-32C of the names (relative to DIR) and sizes of the files: every
 * rank must see the same ones. */
static uint32_t files_crc(const strlist *files, size_t prefix)
{
    uint32_t crc = 0;
    for (size_t i = 0; i < files->n; i++) {
        struct stat st;
        int64_t size = stat(files->s[i], &st) == 0 ? (int64_t)st.st_size : -1;
        crc = cdp_crc32c(crc, files->s[i] + prefix, strlen(files->s[i] + prefix) + 1);
        crc = cdp_crc32c(crc, &size, sizeof size);
    }
    return crc;
}

int cdp_image_folder_open(const cdp_data_spec *spec, cdp_data *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!*cdp_image_formats()) {
        set_err(err, errlen, "--data folder: this build decodes no image format (configure "
                "found neither libturbojpeg nor libpng: install libturbojpeg0-dev and "
                "libpng-dev, then configure again)");
        return -1;
    }
    const int S = spec->size, R = spec->resize;
    char root[2][1100];
    snprintf(root[0], sizeof root[0], "%s/train", spec->dir);
    snprintf(root[1], sizeof root[1], "%s/val", spec->dir);
    struct stat st;
    if (stat(spec->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        set_err(err, errlen, "%s: %s (--data folder:DIR wants DIR/train/CLASS/... and "
                "DIR/val/CLASS/...)", spec->dir, stat(spec->dir, &st) ? strerror(errno)
                : "not a folder");
        return -1;
    }
    strlist classes = {0}, files[2] = {{0}, {0}};
    int32_t *labels[2] = {NULL, NULL};
    uint8_t *val_pixels = NULL;
    cdp_image_folder *f = NULL;
    int rc = -1;
    if (scan_split(root[0], &classes, 1, &files[0], &labels[0], err, errlen) != 0 ||
        scan_split(root[1], &classes, 0, &files[1], &labels[1], err, errlen) != 0)
        goto done;
    const size_t dim = (size_t)3 * S * S;
    if ((uint64_t)files[1].n * dim > ((uint64_t)1 << 34)) {
        set_err(err, errlen, "%s: %zu validation images of %zu bytes are more than the 16 GiB "
                "held in memory", root[1], files[1].n, dim);
        goto done;
    }
    val_pixels = malloc(files[1].n * dim);
    f = calloc(1, sizeof *f);
    if (!val_pixels || !f) {
        set_err(err, errlen, "%s: out of memory for %zu images of %zu bytes", root[1],
                files[1].n, dim);
        goto done;
    }
    if (check_files(&files[0], labels[0], S, R, NULL, spec->skip_bad, &out->skipped, err,
                    errlen) != 0 ||
        check_files(&files[1], labels[1], S, R, val_pixels, spec->skip_bad, &out->skipped,
                    err, errlen) != 0)
        goto done;
    const size_t prefix = strlen(spec->dir) + 1;
    cdp_dataset *sets[2] = {&out->train, &out->test};
    for (int k = 0; k < 2; k++) {
        sets[k]->n = (int64_t)files[k].n;
        sets[k]->dim = (int)dim;
        sets[k]->classes = (int)classes.n;
        sets[k]->labels = labels[k];
        sets[k]->channels = 3;
        sets[k]->height = sets[k]->width = S;
        sets[k]->files_crc = files_crc(&files[k], prefix);
        labels[k] = NULL;
    }
    out->test.pixels = val_pixels;
    val_pixels = NULL;
    f->n = (int64_t)files[0].n;
    f->paths = files[0].s;
    f->size = S;
    f->resize = R;
    f->decoders = spec->decoders;
    f->prefetch = spec->prefetch;
    f->classes = (int)classes.n;
    f->skipped = out->skipped;
    files[0].s = NULL;
    files[0].n = 0;
    out->train.folder = f;
    f = NULL;
    snprintf(out->name, sizeof out->name, "folder");
    rc = 0;
done:
    strlist_free(&classes);
    strlist_free(&files[0]);
    strlist_free(&files[1]);
    free(labels[0]);
    free(labels[1]);
    free(val_pixels);
    free(f);
    if (rc != 0)
        cdp_data_free(out);
    return rc;
}

/* ---------------------------------------------------- training samples */

int cdp_image_folder_sample(const cdp_image_folder *f, uint64_t seed, int64_t epoch,
                            int64_t index, uint8_t *out, char *err, size_t errlen)
{
    cdp_image im;
    const char *path = f->paths[index];
    if (load_image(path, &im, 0, err, errlen) != 0)
        return -1;
    cdp_rrc_draw d[CDP_RRC_ATTEMPTS];
    for (int t = 0; t < CDP_RRC_ATTEMPTS; t++)
        d[t] = cdp_rrc_draws(seed, epoch, index, t);
    const cdp_box box = cdp_rrc_box(im.width, im.height, d);
    /* torchvision's RandomHorizontalFlip draw, as --augment's flip */
    const int flip = cdp_rand_unit(seed, CDP_STREAM_AUG_FLIP ^ cdp_mix64((uint64_t)epoch),
                                   (uint64_t)index) < 0.5f;
    int rc = cdp_crop_resize(im.rgb, im.width, im.height, box, f->size, f->size, flip, out);
    if (rc != 0)
        set_err(err, errlen, "%s: out of memory resizing a %d x %d image", path, im.width,
                im.height);
    cdp_image_free(&im);
    return rc;
}

void cdp_image_folder_gather(const cdp_image_folder *f, uint64_t seed, int64_t epoch,
                             const int64_t *idx, int B, uint8_t *pixels)
{
    const size_t dim = (size_t)3 * f->size * f->size;
    char *errs = calloc((size_t)B, 512);
    if (!errs) {
        fprintf(stderr, "cdp_run: error: out of memory decoding a micro-batch\n");
        exit(1);
    }
    #pragma omp parallel for schedule(dynamic, 1)
    for (int j = 0; j < B; j++)
        cdp_image_folder_sample(f, seed, epoch, idx[j], pixels + (size_t)j * dim,
                                errs + 512 * (size_t)j, 512);
    for (int j = 0; j < B; j++)
        if (errs[512 * (size_t)j])
            cdp_image_folder_fail(errs + 512 * (size_t)j);
    free(errs);
}

void cdp_image_folder_fail(const char *err)
{
    fprintf(stderr, "cdp_run: error: %s (found while training; with --data "
            "folder:DIR:bad=skip every file is decoded when the folder is opened and a "
            "damaged one left out)\n", err);
    exit(1);
}

void cdp_image_folder_free(cdp_image_folder *f)
{
    if (!f)
        return;
    for (int64_t i = 0; i < f->n; i++)
        free(f->paths[i]);
    free(f->paths);
    free(f);
}
