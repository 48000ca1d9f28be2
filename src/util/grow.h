/* Growing arrays: the one place that reallocates them. */
#ifndef CDP_GROW_H
#define CDP_GROW_H

#include <stdlib.h>

/* Makes room for one more element in arr (n used, cap allocated), doubling
 * from `first`; aborts when memory runs out. */
#define CDP_GROW(arr, n, cap, first)                                  \
    do {                                                              \
        if ((n) == (cap)) {                                           \
            size_t c_ = (cap) ? 2 * (cap) : (first);                  \
            void *p_ = realloc((arr), c_ * sizeof *(arr));            \
            if (!p_) abort();                                         \
            (arr) = p_;                                               \
            (cap) = c_;                                               \
        }                                                             \
    } while (0)

#endif
