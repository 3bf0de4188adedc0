/* kgen_text.c — the assembly buffer of the kernel generators (see kgen_text.h). */
#include "kgen_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "isa_asm.h"

void kgen_text_init(kgen_text *t)
{
    t->cap = 4096;
    t->len = 0;
    t->s = malloc(t->cap);
    t->oom = t->s == NULL;
}

void kgen_emit(kgen_text *t, const char *fmt, ...)
{
    if (t->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t nc = t->cap * 2 + (size_t)n + 1;
        char *ns = realloc(t->s, nc);
        if (!ns) {
            t->oom = true;
            return;
        }
        t->s = ns, t->cap = nc;
    }
}

void kgen_text_free(kgen_text *t)
{
    free(t->s);
    t->s = NULL;
    t->len = t->cap = 0;
}

np_status kgen_text_finish(kgen_text *t, const arch_config *cfg, const char *name, char **text,
                           isa_program **prog, np_err *err)
{
    *text = NULL;
    if (t->oom) {
        kgen_text_free(t);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory generating %s", name);
    }
    if (prog) {
        isa_target tg;
        isa_target_from_arch(cfg, &tg);
        isa_asm_opts o = {.target = &tg};
        if (isa_asm(t->s, t->len, name, &o, prog, err) != NP_OK) {
            kgen_text_free(t);
            return err->status;
        }
    }
    *text = t->s;
    t->s = NULL;
    return NP_OK;
}
