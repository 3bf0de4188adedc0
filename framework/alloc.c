/* alloc.c — the framework's allocator: the C library's, with fault injection for tests
 * (Lua's failing allocator, SQLite's fault tests): an allocation failure anywhere must give
 * an NP_ERR_NOMEM error, never a crash or a leak. */
#include <stdlib.h>

#include "nn_impl.h"

static long nn_alloc_countdown = -1; /* < 0: never fail */

void nn_fault_inject_alloc(long n)
{
    nn_alloc_countdown = n;
}

static bool nn_alloc_fails(void)
{
    if (nn_alloc_countdown < 0)
        return false;
    if (nn_alloc_countdown == 0)
        return true;
    nn_alloc_countdown--;
    return false;
}

void *nn_malloc(size_t size)
{
    return nn_alloc_fails() ? NULL : malloc(size);
}

void *nn_calloc(size_t n, size_t size)
{
    return nn_alloc_fails() ? NULL : calloc(n, size);
}

void *nn_realloc(void *p, size_t size)
{
    return nn_alloc_fails() ? NULL : realloc(p, size);
}
