/* verify.c — the switch of the invariant checkers (verify.h). */
#include "verify.h"

#include <stdlib.h>
#include <string.h>

static int verify_state = -1; /* -1: not decided yet; 0 off; 1 on */

bool np_verify_on(void)
{
    if (verify_state < 0) {
#ifdef NDEBUG
        const char *v = getenv("NPUSIM_VERIFY");
        verify_state = v && strcmp(v, "1") == 0;
#else
        verify_state = 1;
#endif
    }
    return verify_state == 1;
}

void np_verify_enable(bool on) { verify_state = on ? 1 : 0; }
