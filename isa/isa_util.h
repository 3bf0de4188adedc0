/* isa_util.h — small helpers private to isa/: a growing text buffer and array growth. */
#ifndef NPUSIM_ISA_UTIL_H
#define NPUSIM_ISA_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* A growing NUL-terminated string. After an allocation failure oom is set, further writes
 * are dropped, and the owner reports NP_ERR_NOMEM. */
typedef struct isa_buf {
    char *s;
    size_t len, cap;
    bool oom;
} isa_buf;

void isa_buf_printf(isa_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void isa_buf_put(isa_buf *b, const char *s, size_t n);

/* Makes room for need (>= 1) elements of elem bytes in the array p of capacity *cap
 * (doubling): returns the array to use from now on, or NULL when out of memory (then p and
 * *cap are unchanged and p is still valid). Grow `arr` with
 *   T *t = isa_grow(arr, &cap, n + 1, sizeof *arr); if (!t) fail; arr = t;  */
void *isa_grow(void *p, size_t *cap, size_t need, size_t elem);

/* The grow step of the idiom above as one expression that yields false when out of memory. */
#define ISA_GROW(arr, cap, need)                                                               \
    isa_grow_into((void *)&(arr), isa_grow((arr), &(cap), (need), sizeof *(arr)))
bool isa_grow_into(void *slot, void *grown);

#endif
