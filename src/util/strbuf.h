/* Text built piece by piece into a fixed buffer. */
#ifndef CDP_STRBUF_H
#define CDP_STRBUF_H

#include <stddef.h>

/* printf's fmt appended to buf[*at..len), *at moved past what was written;
 * once the buffer is full, nothing more (the text stays terminated). */
void cdp_strbuf_add(char *buf, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
