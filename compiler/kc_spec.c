/* kc_spec.c — `npusim kernel --op "NAME key=value ..."`: the parser and the kernel of a spec
 * (see kernel.h). Every op plugs in through its row of the kernel table: its keys and
 * attributes are the keys, its build function makes the kernel. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "parse.h"
#include "suggest.h"

#define KC_SPEC_MAX_ELEMS (1ULL << 50) /* a shape's elements, as a model tensor's */

static const struct {
    const char *name;
    nn_dtype t;
} kc_dtype_words[] = {
    {"bf16", NN_BF16}, {"fp16", NN_F16}, {"f16", NN_F16}, {"fp32", NN_F32}, {"f32", NN_F32},
    {"int8", NN_I8},   {"i8", NN_I8},    {"int32", NN_I32}, {"i32", NN_I32},
};

/* Every key of d in order: its --op keys, then its attributes. */
static unsigned def_keys(const kc_kernel_def *d, const kc_attr_def **out)
{
    unsigned n = 0;
    for (unsigned i = 0; i < d->n_keys && n < KC_MAX_SPEC; i++)
        out[n++] = &d->keys[i];
    for (unsigned i = 0; i < d->n_attrs && n < KC_MAX_SPEC; i++)
        out[n++] = &d->attrs[i];
    return n;
}

/* A double as an integer, saturated at int64's range (a bound of the table: callers round lo
 * up and hi down; a real's integer part). */
static int64_t attr_bound(double v)
{
    return v <= -9.2e18 ? INT64_MIN : v >= 9.2e18 ? INT64_MAX : (int64_t)v;
}

/* One value of the spec through the one door (base/parse.h); errors name "OP KEY". */
static np_status parse_value(const char *op, const kc_attr_def *a, const char *v,
                             kc_spec_val *out, np_err *err)
{
    char name[96];
    snprintf(name, sizeof name, "%s %s", op, a->name);
    const np_src *src = NP_SRC_OPT(name);
    out->name = a->name;
    out->type = a->type;
    switch (a->type) {
    case KC_ATTR_INT:
    case KC_ATTR_BOOL: {
        int64_t x;
        if (a->type == KC_ATTR_BOOL && (!strcmp(v, "true") || !strcmp(v, "false")))
            x = v[0] == 't';
        else if (np_parse_i64(src, v, attr_bound(ceil(a->min)), attr_bound(floor(a->max)), &x,
                              err) != NP_OK)
            return err->status;
        out->i = x;
        out->f = (double)x;
        return NP_OK;
    }
    case KC_ATTR_REAL:
        if (np_parse_f64(src, v, a->min, a->max, &out->f, err) != NP_OK)
            return err->status;
        out->i = attr_bound(out->f); /* not a cast past int64 (found by fuzz_kspec) */
        return NP_OK;
    case KC_ATTR_DTYPE: {
        enum { N_WORDS = sizeof kc_dtype_words / sizeof kc_dtype_words[0] };
        const char *words[N_WORDS];
        for (size_t i = 0; i < N_WORDS; i++)
            words[i] = kc_dtype_words[i].name;
        size_t i;
        if (np_parse_enum(src, v, "dtype", words, N_WORDS, &i, err) != NP_OK)
            return err->status;
        out->i = kc_dtype_words[i].t;
        out->f = (double)out->i;
        return NP_OK;
    }
    case KC_ATTR_SHAPE: {
        uint64_t d[KC_MAX_DIMS];
        int n;
        if (np_parse_dims(src, v, 1, KC_MAX_DIMS, 1, KC_SPEC_MAX_ELEMS, KC_SPEC_MAX_ELEMS, d, &n,
                          err) != NP_OK)
            return err->status;
        out->ndim = n;
        for (int i = 0; i < n; i++)
            out->shape[i] = (int64_t)d[i];
        return NP_OK;
    }
    }
    return np_err_set(err, NP_ERR_INTERNAL, "%s %s: unknown key type", op, a->name);
}

np_status kc_spec_parse(const char *text, kc_spec *s, np_err *err)
{
    memset(s, 0, sizeof *s);
    char buf[1024];
    if (strlen(text) >= sizeof buf)
        return np_err_set(err, NP_ERR_RANGE, "an op spec of %zu characters (at most %zu)",
                          strlen(text), sizeof buf - 1);
    strcpy(buf, text);
    char *save = NULL, *tok = strtok_r(buf, " \t", &save);
    if (!tok)
        return np_err_set(err, NP_ERR_MISSING, "no op: expected \"NAME key=value ...\", e.g. "
                          "\"matmul m=4096 n=4096 k=4096 dtype=bf16\"");
    int op = -1;
    const char *names[NN_OP_COUNT];
    for (int o = 0; o < NN_OP_COUNT; o++) {
        names[o] = nn_op_name((nn_op)o);
        if (!strcmp(names[o], tok))
            op = o;
    }
    if (op < 0) {
        const char *sug = np_suggest(tok, names, NN_OP_COUNT, 3);
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "unknown op '%s'%s%s%s", tok,
                          sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
    }
    const kc_kernel_def *d = kc_kernel_find((nn_op)op);
    if (!d) {
        const char *why = kc_no_kernel_reason((nn_op)op);
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "op '%s' has no kernel%s%s", tok,
                          why ? ": " : " yet", why ? why : "");
    }
    s->op = (nn_op)op;
    const kc_attr_def *keys[KC_MAX_SPEC];
    const char *key_names[KC_MAX_SPEC];
    bool given[KC_MAX_SPEC] = {false};
    unsigned nk = def_keys(d, keys);
    for (unsigned i = 0; i < nk; i++)
        key_names[i] = keys[i]->name;
    s->n = nk;
    while ((tok = strtok_r(NULL, " \t", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return np_err_set(err, NP_ERR_SYNTAX, "%s: '%s' is not key=value", names[op], tok);
        *eq = '\0';
        unsigned i = 0;
        while (i < nk && strcmp(keys[i]->name, tok))
            i++;
        if (i == nk) {
            const char *sug = np_suggest(tok, key_names, nk, 2);
            return np_err_set(err, NP_ERR_UNKNOWN_KEY, "%s has no key '%s'%s%s%s", names[op], tok,
                              sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
        }
        if (given[i])
            return np_err_set(err, NP_ERR_DUPLICATE, "%s: key '%s' given twice", names[op], tok);
        given[i] = true;
        if (parse_value(names[op], keys[i], eq + 1, &s->v[i], err) != NP_OK)
            return err->status;
        s->v[i].given = true;
    }
    for (unsigned i = 0; i < nk; i++) {
        if (given[i])
            continue;
        if (isnan(keys[i]->dflt))
            return np_err_set(err, NP_ERR_MISSING, "%s needs %s=...", names[op], keys[i]->name);
        s->v[i] = (kc_spec_val){keys[i]->name, keys[i]->type, (int64_t)keys[i]->dflt,
                                keys[i]->dflt, 0, {0}, false};
    }
    return NP_OK;
}

const kc_spec_val *kc_spec_get(const kc_spec *s, const char *name)
{
    for (unsigned i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].name, name))
            return &s->v[i];
    return NULL;
}

np_status kc_spec_kernel(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err)
{
    memset(k, 0, sizeof *k);
    const kc_kernel_def *d = kc_kernel_find(s->op);
    if (!d || !d->build)
        return np_err_set(err, NP_ERR_UNKNOWN_KEY, "op '%s' cannot be built from --op keys",
                          nn_op_name(s->op));
    if (d->build(p, s, k, err) != NP_OK)
        return err->status;
    k->op = s->op;
    for (unsigned i = 0; i < d->n_attrs && k->n_attrs < KC_MAX_ATTRS; i++) {
        const kc_spec_val *v = kc_spec_get(s, d->attrs[i].name);
        if (v && v->given)
            k->attrs[k->n_attrs++] = (kc_attr){d->attrs[i].name, v->i, v->f};
    }
    return NP_OK;
}
