/* isa_util.c — see isa_util.h. */
#include "isa_util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *isa_grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap && p)
        return p;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return NULL;
        n *= 2;
    }
    void *q = realloc(p, n * elem);
    if (!q)
        return NULL;
    *cap = n;
    return q;
}

bool isa_grow_into(void *slot, void *grown)
{
    if (!grown)
        return false;
    memcpy(slot, &grown, sizeof grown); /* slot is the address of a T* variable */
    return true;
}

void isa_buf_put(isa_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (!ISA_GROW(b->s, b->cap, b->len + n + 1)) {
        b->oom = true;
        return;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void isa_buf_printf(isa_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if ((size_t)k < sizeof small) {
        isa_buf_put(b, small, (size_t)k);
        return;
    }
    char *big = malloc((size_t)k + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    isa_buf_put(b, big, (size_t)k);
    free(big);
}
