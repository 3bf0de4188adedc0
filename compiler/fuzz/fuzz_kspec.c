/* fuzz_kspec.c — libFuzzer harness for `npusim kernel --op "NAME key=value ..."` specs
 * (kc_spec_parse, compiler/kernel.h). The input is the option's text. It must parse or fail
 * with a bad-input error and a message; a spec that parses is written back as text (the op,
 * then every given key with its value) and must parse again to the same values. */
#include <stdio.h>
#include <string.h>

#include "fuzz_harness.h"
#include "kernel.h"

/* s written as an --op text. */
static void kspec_text(const kc_spec *s, char *buf, size_t n)
{
    size_t w = (size_t)snprintf(buf, n, "%s", nn_op_name(s->op));
    for (unsigned i = 0; i < s->n && w < n; i++) {
        const kc_spec_val *v = &s->v[i];
        if (!v->given)
            continue;
        w += (size_t)snprintf(buf + w, n - w, " %s=", v->name);
        switch (v->type) {
        case KC_ATTR_INT:
        case KC_ATTR_BOOL: w += (size_t)snprintf(buf + w, n - w, "%lld", (long long)v->i); break;
        case KC_ATTR_REAL: w += (size_t)snprintf(buf + w, n - w, "%.17g", v->f); break;
        case KC_ATTR_DTYPE:
            w += (size_t)snprintf(buf + w, n - w, "%s", nn_dtype_name((nn_dtype)v->i));
            break;
        case KC_ATTR_SHAPE:
            for (int d = 0; d < v->ndim && w < n; d++)
                w += (size_t)snprintf(buf + w, n - w, "%s%lld", d ? "x" : "",
                                      (long long)v->shape[d]);
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[2048];
    if (size >= sizeof text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    kc_spec s, again;
    np_err e = {0};
    np_status st = kc_spec_parse(text, &s, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        return 0;
    }
    char back[4096];
    kspec_text(&s, back, sizeof back);
    if (kc_spec_parse(back, &again, &e) != NP_OK || again.op != s.op || again.n != s.n)
        abort(); /* what was accepted reads back */
    for (unsigned i = 0; i < s.n; i++) {
        const kc_spec_val *a = &s.v[i], *b = &again.v[i];
        if (a->given != b->given || a->i != b->i || a->ndim != b->ndim ||
            memcmp(a->shape, b->shape, sizeof a->shape) ||
            (a->type == KC_ATTR_REAL && a->f != b->f))
            abort();
    }
    return 0;
}
