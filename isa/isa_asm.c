/* isa_asm.c — the two-pass assembler.
 *
 * Pass 1 reads every line: it defines labels, records .equ expressions (evaluated lazily),
 * lays out sections (instruction counts per core, .data and .bss sizes), checks loop nesting,
 * and looks up mnemonics. Between the passes, section addresses and label values are fixed and
 * the target architecture is settled. Pass 2 re-reads the recorded statements: it parses
 * operands against the op's field table (isa.def), evaluates expressions with every symbol
 * known, range-checks each operand (isa_operand_check) and writes data bytes. Finally the
 * name table is built (sorted, so that the disassembly reassembles to the same offsets) and
 * the program is checked with isa_program_validate.
 *
 * Errors stop at the first one and carry file, line and the column of the offending token.
 */
#include "isa_asm.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa_util.h"
#include "readfile.h"
#include "suggest.h"

#define TRY(x)                                                                                 \
    do {                                                                                       \
        np_status st_ = (x);                                                                   \
        if (st_ != NP_OK)                                                                      \
            return st_;                                                                        \
    } while (0)

enum { SEC_NONE = -1, SEC_DATA = -2, SEC_BSS = -3 }; /* >= 0: a core slot */

typedef struct asm_val {
    bool is_float;
    int64_t i;
    double f;
} asm_val;

enum { SYM_EQU, SYM_LABEL };
enum { EQU_TODO, EQU_BUSY, EQU_DONE };

typedef struct asm_sym {
    char *name;
    int kind;
    int line, col;
    const char *text; /* .equ: its line, and where the expression starts */
    size_t text_len, pos;
    int state;
    asm_val val;      /* .equ value; label address once laid out */
    int sec;          /* label: section */
    uint64_t off;     /* label: offset in the section */
    bool has_size;    /* .size given */
    int64_t size;
} asm_sym;

typedef struct asm_core {
    uint32_t core;
    int line, col; /* the first .core naming it (0: implicit core 0) */
    uint32_t n_insns;
    isa_insn *insns;
    isa_kernel *kernels;
    size_t n_kernels, cap_kernels;
    size_t *khash, khash_cap; /* kernel names: open addressing, index + 1, 0 empty */
    bool kernel_open;     /* the last kernel has not ended yet (no .endk) */
    unsigned depth;       /* open loops */
    int loop_line[ISA_LOOP_DEPTH], loop_col[ISA_LOOP_DEPTH];
} asm_core;

enum { ST_INSN, ST_DATA, ST_SIZE };
enum { D_BYTE, D_HALF, D_WORD, D_DWORD, D_FLOAT, D_BF16, D_FP16 };

typedef struct asm_stmt {
    int kind;
    int what; /* ST_INSN: the isa_op; ST_DATA: D_*; ST_SIZE: the symbol */
    int line, col;
    const char *text;
    size_t text_len, pos; /* the line, and where the operands start */
    int sec;
    uint64_t off; /* ST_INSN: instruction index; ST_DATA: offset in .data */
} asm_stmt;

typedef struct asm_nameref {
    char *str;
    int sec;
    uint32_t insn;
    unsigned field;
} asm_nameref;

typedef struct asm_state {
    const char *file;
    np_err *err;
    int pass;
    asm_sym *syms;
    size_t n_syms, cap_syms;
    size_t *hash; /* open addressing: symbol index + 1, 0 empty */
    size_t hash_cap;
    asm_core *cores;
    size_t n_cores, cap_cores;
    asm_stmt *stmts;
    size_t n_stmts, cap_stmts;
    asm_nameref *names;
    size_t n_names, cap_names;
    int sec;
    bool have_data, have_bss, data_based, bss_based;
    int data_line, bss_line;
    uint64_t data_base, data_size, bss_base, bss_size;
    uint8_t *data;
    bool have_target;
    isa_target target;
    int target_line, target_col;
    int nesting;   /* current expression nesting (parentheses, unary operators) */
    int equ_depth; /* .equ evaluations in progress */
} asm_state;

typedef struct asm_cur {
    asm_state *as;
    const char *s;
    size_t n, i;
    int line;
} asm_cur;

/* Nesting limits that keep the recursive descent's stack bounded on hostile input. */
#define ASM_MAX_NESTING 256 /* parentheses and unary operators in one expression */
#define ASM_MAX_EQU_DEPTH 64 /* .equ symbols defined through each other */

enum { TK_EOL, TK_IDENT, TK_NUM, TK_STR, TK_PUNCT };

typedef struct asm_tok {
    int kind;
    size_t pos, len;
    asm_val num;
    char p[3];
} asm_tok;

/* ---- Errors ------------------------------------------------------------------------------------ */

static np_status asm_err(asm_cur *c, size_t pos, np_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static np_status asm_err(asm_cur *c, size_t pos, np_status st, const char *fmt, ...)
{
    char msg[NP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return np_err_at(c->as->err, st, c->as->file, c->line, (int)pos + 1, "%s", msg);
}

/* Gives an error filled elsewhere (e.g. by isa_operand_check) the position of pos. */
static np_status asm_place(asm_cur *c, size_t pos)
{
    np_err *e = c->as->err;
    snprintf(e->file, sizeof e->file, "%s", c->as->file);
    e->line = c->line;
    e->col = (int)pos + 1;
    return e->status;
}

static np_status asm_nomem(asm_state *as)
{
    return np_err_set(as->err, NP_ERR_NOMEM, "out of memory while assembling %s", as->file);
}

/* ---- Lexer ------------------------------------------------------------------------------------- */

static bool asm_id0(char ch)
{
    return isalpha((unsigned char)ch) || ch == '_' || ch == '.' || ch == '$';
}

static bool asm_id(char ch)
{
    return asm_id0(ch) || isdigit((unsigned char)ch);
}

static bool asm_at_comment(const asm_cur *c)
{
    char ch = c->s[c->i];
    return ch == ';' || ch == '#' || (ch == '/' && c->i + 1 < c->n && c->s[c->i + 1] == '/');
}

static void asm_skip(asm_cur *c)
{
    while (c->i < c->n && strchr(" \t\r\v\f", c->s[c->i]) && c->s[c->i])
        c->i++;
}

static np_status asm_lex_number(asm_cur *c, asm_tok *t)
{
    const char *s = c->s;
    size_t i = c->i;
    t->kind = TK_NUM;
    if (s[i] == '0' && i + 1 < c->n && (s[i + 1] == 'x' || s[i + 1] == 'X' || s[i + 1] == 'b' ||
                                        s[i + 1] == 'B')) {
        unsigned base = (s[i + 1] == 'x' || s[i + 1] == 'X') ? 16 : 2;
        uint64_t v = 0;
        size_t digits = 0;
        i += 2;
        for (; i < c->n && isxdigit((unsigned char)s[i]); i++, digits++) {
            unsigned d = isdigit((unsigned char)s[i]) ? (unsigned)(s[i] - '0')
                                                       : (unsigned)(tolower(s[i]) - 'a' + 10);
            if (d >= base)
                break;
            if (v > (UINT64_MAX >> (base == 16 ? 4 : 1)))
                return asm_err(c, t->pos, NP_ERR_RANGE, "number '%.*s' does not fit 64 bits",
                               (int)(i + 1 - t->pos), s + t->pos);
            v = v * base + d;
        }
        if (digits == 0 || (i < c->n && asm_id(s[i])))
            goto bad;
        t->num.i = (int64_t)v;
        c->i = i;
        t->len = i - t->pos;
        return NP_OK;
    }
    uint64_t v = 0;
    bool big = false;
    for (; i < c->n && isdigit((unsigned char)s[i]); i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            big = true;
        v = v * 10 + d;
    }
    bool is_float = false;
    if (i + 1 < c->n && s[i] == '.' && isdigit((unsigned char)s[i + 1])) {
        is_float = true;
        for (i++; i < c->n && isdigit((unsigned char)s[i]); i++)
            ;
    }
    if (i < c->n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < c->n && (s[j] == '+' || s[j] == '-'))
            j++;
        if (j < c->n && isdigit((unsigned char)s[j])) {
            is_float = true;
            for (i = j; i < c->n && isdigit((unsigned char)s[i]); i++)
                ;
        }
    }
    if (i < c->n && asm_id(s[i]))
        goto bad;
    t->len = i - t->pos;
    c->i = i;
    if (is_float) {
        char buf[128];
        if (t->len >= sizeof buf)
            return asm_err(c, t->pos, NP_ERR_SYNTAX, "number '%.20s...' is too long",
                           s + t->pos);
        memcpy(buf, s + t->pos, t->len);
        buf[t->len] = '\0';
        t->num.is_float = true;
        t->num.f = strtod(buf, NULL);
        if (!isfinite(t->num.f))
            return asm_err(c, t->pos, NP_ERR_RANGE, "number '%s' is out of range", buf);
        return NP_OK;
    }
    if (big)
        return asm_err(c, t->pos, NP_ERR_RANGE, "number '%.*s' does not fit 64 bits",
                       (int)t->len, s + t->pos);
    t->num.i = (int64_t)v;
    return NP_OK;
bad:
    while (i < c->n && asm_id(s[i]))
        i++;
    return asm_err(c, t->pos, NP_ERR_SYNTAX, "bad number '%.*s'", (int)(i - t->pos), s + t->pos);
}

static np_status asm_lex(asm_cur *c, asm_tok *t)
{
    asm_skip(c);
    memset(t, 0, sizeof *t);
    t->pos = c->i;
    if (c->i >= c->n || asm_at_comment(c)) {
        t->kind = TK_EOL;
        return NP_OK;
    }
    const char *s = c->s;
    unsigned char ch = (unsigned char)s[c->i];
    if (asm_id0(s[c->i])) {
        while (c->i < c->n && asm_id(s[c->i]))
            c->i++;
        t->kind = TK_IDENT;
        t->len = c->i - t->pos;
        return NP_OK;
    }
    if (isdigit(ch))
        return asm_lex_number(c, t);
    if (ch == '"') {
        size_t i = c->i + 1;
        while (i < c->n && s[i] != '"') {
            if (s[i] == '\\' && i + 1 < c->n)
                i++;
            i++;
        }
        if (i >= c->n)
            return asm_err(c, t->pos, NP_ERR_SYNTAX, "unterminated string");
        c->i = i + 1;
        t->kind = TK_STR;
        t->len = c->i - t->pos;
        return NP_OK;
    }
    static const char *const two[] = {"+=", "-=", "<<", ">>"};
    for (size_t k = 0; k < sizeof two / sizeof two[0]; k++)
        if (c->i + 1 < c->n && s[c->i] == two[k][0] && s[c->i + 1] == two[k][1]) {
            memcpy(t->p, two[k], 2);
            c->i += 2;
            t->kind = TK_PUNCT;
            t->len = 2;
            return NP_OK;
        }
    if (ch && strchr(",[]()+-*/%&|^~=:", ch)) {
        t->p[0] = (char)ch;
        c->i++;
        t->kind = TK_PUNCT;
        t->len = 1;
        return NP_OK;
    }
    if (isprint(ch))
        return asm_err(c, t->pos, NP_ERR_SYNTAX, "unexpected character '%c'", ch);
    return asm_err(c, t->pos, NP_ERR_SYNTAX, "unexpected byte 0x%02x", ch);
}

static np_status asm_peek(asm_cur *c, asm_tok *t)
{
    size_t save = c->i;
    np_status st = asm_lex(c, t);
    c->i = save;
    return st;
}

static bool asm_is(const asm_tok *t, const char *punct)
{
    return t->kind == TK_PUNCT && strcmp(t->p, punct) == 0;
}

static bool asm_tok_is(const asm_cur *c, const asm_tok *t, const char *word)
{
    return t->kind == TK_IDENT && t->len == strlen(word) && memcmp(c->s + t->pos, word, t->len) == 0;
}

/* The token as text for messages ("end of line" at the end). */
static const char *asm_tok_text(const asm_cur *c, const asm_tok *t, char *buf, size_t n)
{
    if (t->kind == TK_EOL)
        snprintf(buf, n, "end of line");
    else if (t->len > 40)
        snprintf(buf, n, "'%.37s...'", c->s + t->pos);
    else
        snprintf(buf, n, "'%.*s'", (int)t->len, c->s + t->pos);
    return buf;
}

static np_status asm_expect(asm_cur *c, const char *punct, const char *after)
{
    asm_tok t;
    TRY(asm_lex(c, &t));
    if (!asm_is(&t, punct)) {
        char b[64];
        return asm_err(c, t.pos, NP_ERR_SYNTAX, "expected '%s' %s, got %s", punct, after,
                       asm_tok_text(c, &t, b, sizeof b));
    }
    return NP_OK;
}

static np_status asm_expect_eol(asm_cur *c, const char *after)
{
    asm_tok t;
    TRY(asm_lex(c, &t));
    if (t.kind != TK_EOL) {
        char b[64];
        return asm_err(c, t.pos, NP_ERR_SYNTAX, "unexpected %s after %s",
                       asm_tok_text(c, &t, b, sizeof b), after);
    }
    return NP_OK;
}

/* r0..r15 (true, *r set); "r<digits>" out of range is an error. */
static np_status asm_register(asm_cur *c, const asm_tok *t, bool *is_reg, unsigned *r)
{
    *is_reg = false;
    if (t->kind != TK_IDENT || t->len < 2 || c->s[t->pos] != 'r')
        return NP_OK;
    unsigned v = 0;
    for (size_t k = 1; k < t->len; k++) {
        if (!isdigit((unsigned char)c->s[t->pos + k]))
            return NP_OK;
        if (v < 1000)
            v = v * 10 + (unsigned)(c->s[t->pos + k] - '0');
    }
    *is_reg = true;
    if (v >= ISA_N_REGS)
        return asm_err(c, t->pos, NP_ERR_RANGE, "register '%.*s' does not exist (r0..r15)",
                       (int)t->len, c->s + t->pos);
    *r = v;
    return NP_OK;
}

/* Decodes a string token's escapes into a malloc'd string (*out); NUL bytes are refused. */
static np_status asm_string(asm_cur *c, const asm_tok *t, char **out, size_t *out_len)
{
    const char *s = c->s + t->pos + 1;
    size_t n = t->len - 2;
    char *r = malloc(n + 1);
    if (!r)
        return asm_nomem(c->as);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\') {
            size_t at = t->pos + 1 + i; /* the backslash */
            char e = i + 1 < n ? s[i + 1] : '\0';
            i++;
            if (e == 'n')
                ch = '\n';
            else if (e == 't')
                ch = '\t';
            else if (e == '\\' || e == '"')
                ch = e;
            else if (e == 'x' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
                     isxdigit((unsigned char)s[i + 2])) {
                char hex[3] = {s[i + 1], s[i + 2], 0};
                ch = (char)strtoul(hex, NULL, 16);
                i += 2;
            } else {
                free(r);
                return asm_err(c, at, NP_ERR_SYNTAX, "bad escape in string (use \\n, \\t, "
                               "\\\\, \\\" or \\xNN)");
            }
            if (ch == '\0') {
                free(r);
                return asm_err(c, at, NP_ERR_RANGE, "a string cannot contain a NUL byte");
            }
        } else if (ch == '\0') { /* a raw one, as much as an escaped one */
            free(r);
            return asm_err(c, t->pos + 1 + i, NP_ERR_RANGE, "a string cannot contain a NUL byte");
        }
        r[len++] = ch;
    }
    r[len] = '\0';
    *out = r;
    if (out_len)
        *out_len = len;
    return NP_OK;
}

/* ---- Symbols ----------------------------------------------------------------------------------- */

static size_t asm_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return (size_t)h;
}

static long asm_sym_find(const asm_state *as, const char *s, size_t n)
{
    if (!as->hash_cap)
        return -1;
    for (size_t h = asm_hash(s, n) & (as->hash_cap - 1);; h = (h + 1) & (as->hash_cap - 1)) {
        size_t v = as->hash[h];
        if (!v)
            return -1;
        const char *name = as->syms[v - 1].name;
        if (strlen(name) == n && memcmp(name, s, n) == 0)
            return (long)(v - 1);
    }
}

static bool asm_hash_insert(asm_state *as, size_t idx)
{
    if ((as->n_syms + 1) * 2 > as->hash_cap) {
        size_t cap = as->hash_cap ? as->hash_cap * 2 : 64;
        size_t *h = calloc(cap, sizeof *h);
        if (!h)
            return false;
        free(as->hash);
        as->hash = h;
        as->hash_cap = cap;
        for (size_t k = 0; k < as->n_syms; k++)
            if (k != idx) {
                const char *nm = as->syms[k].name;
                size_t p = asm_hash(nm, strlen(nm)) & (cap - 1);
                while (h[p])
                    p = (p + 1) & (cap - 1);
                h[p] = k + 1;
            }
    }
    const char *nm = as->syms[idx].name;
    size_t p = asm_hash(nm, strlen(nm)) & (as->hash_cap - 1);
    while (as->hash[p])
        p = (p + 1) & (as->hash_cap - 1);
    as->hash[p] = idx + 1;
    return true;
}

/* The index of core k's kernel named s[0..n), or -1. */
static long asm_kernel_find(const asm_core *k, const char *s, size_t n)
{
    if (!k->khash_cap)
        return -1;
    for (size_t h = asm_hash(s, n) & (k->khash_cap - 1);; h = (h + 1) & (k->khash_cap - 1)) {
        size_t v = k->khash[h];
        if (!v)
            return -1;
        const char *name = k->kernels[v - 1].name;
        if (strlen(name) == n && memcmp(name, s, n) == 0)
            return (long)(v - 1);
    }
}

/* Adds kernel idx of core k to its name set (grown to twice the kernels). */
static bool asm_kernel_hash_insert(asm_core *k, size_t idx)
{
    if ((k->n_kernels + 1) * 2 > k->khash_cap) {
        size_t cap = k->khash_cap ? k->khash_cap * 2 : 64;
        size_t *h = calloc(cap, sizeof *h);
        if (!h)
            return false;
        free(k->khash);
        k->khash = h;
        k->khash_cap = cap;
        for (size_t j = 0; j < k->n_kernels; j++)
            if (j != idx) {
                const char *nm = k->kernels[j].name;
                size_t p = asm_hash(nm, strlen(nm)) & (cap - 1);
                while (h[p])
                    p = (p + 1) & (cap - 1);
                h[p] = j + 1;
            }
    }
    const char *nm = k->kernels[idx].name;
    size_t p = asm_hash(nm, strlen(nm)) & (k->khash_cap - 1);
    while (k->khash[p])
        p = (p + 1) & (k->khash_cap - 1);
    k->khash[p] = idx + 1;
    return true;
}

/* Defines a new symbol named by token t; DUPLICATE if it exists, SYNTAX if reserved. */
static np_status asm_sym_new(asm_cur *c, const asm_tok *t, int kind, long *idx)
{
    asm_state *as = c->as;
    const char *s = c->s + t->pos;
    if (!isa_name_ok(s, t->len))
        return asm_err(c, t->pos, NP_ERR_SYNTAX, "'%.*s' is a reserved word and cannot name a "
                       "symbol", (int)t->len, s);
    long old = asm_sym_find(as, s, t->len);
    if (old >= 0)
        return asm_err(c, t->pos, NP_ERR_DUPLICATE, "symbol '%.*s' is already defined at line %d",
                       (int)t->len, s, as->syms[old].line);
    if (!ISA_GROW(as->syms, as->cap_syms, as->n_syms + 1))
        return asm_nomem(as);
    asm_sym *y = &as->syms[as->n_syms];
    memset(y, 0, sizeof *y);
    y->name = malloc(t->len + 1);
    if (!y->name)
        return asm_nomem(as);
    memcpy(y->name, s, t->len);
    y->name[t->len] = '\0';
    y->kind = kind;
    y->line = c->line;
    y->col = (int)t->pos + 1;
    as->n_syms++;
    if (!asm_hash_insert(as, as->n_syms - 1))
        return asm_nomem(as);
    *idx = (long)as->n_syms - 1;
    return NP_OK;
}

/* ---- Expressions ------------------------------------------------------------------------------- */

static np_status ex_or(asm_cur *c, asm_val *v);

static np_status asm_equ_eval(asm_cur *c, const asm_tok *ref, asm_sym *y)
{
    if (y->state == EQU_DONE)
        return NP_OK;
    if (y->state == EQU_BUSY)
        return asm_err(c, ref->pos, NP_ERR_INCONSISTENT, "symbol '%s' is defined in terms of "
                       "itself", y->name);
    if (c->as->equ_depth >= ASM_MAX_EQU_DEPTH)
        return asm_err(c, ref->pos, NP_ERR_RANGE, "symbol '%s': .equ symbols nest more than %d "
                       "deep", y->name, ASM_MAX_EQU_DEPTH);
    y->state = EQU_BUSY;
    asm_cur e = {c->as, y->text, y->text_len, y->pos, y->line};
    asm_val v;
    int saved = c->as->nesting;
    c->as->nesting = 0;
    c->as->equ_depth++;
    np_status st = ex_or(&e, &v);
    if (st == NP_OK)
        st = asm_expect_eol(&e, "the .equ expression");
    c->as->equ_depth--;
    c->as->nesting = saved;
    if (st != NP_OK)
        return st;
    y->val = v;
    y->state = EQU_DONE;
    return NP_OK;
}

static np_status asm_symbol_value(asm_cur *c, const asm_tok *t, asm_val *v)
{
    asm_state *as = c->as;
    long idx = asm_sym_find(as, c->s + t->pos, t->len);
    if (idx < 0) {
        if (as->pass == 1)
            return asm_err(c, t->pos, NP_ERR_UNKNOWN_KEY, "undefined symbol '%.*s' (values of "
                           ".core, .data, .bss, .zero, .space and .align may only use .equ "
                           "symbols defined above)", (int)t->len, c->s + t->pos);
        char word[128];
        snprintf(word, sizeof word, "%.*s", (int)(t->len < 127 ? t->len : 127), c->s + t->pos);
        const char *best = NULL;
        size_t best_d = 3;
        for (size_t k = 0; k < as->n_syms; k++) {
            size_t d = np_edit_distance(word, as->syms[k].name);
            if (d < best_d) {
                best_d = d;
                best = as->syms[k].name;
            }
        }
        if (best)
            return asm_err(c, t->pos, NP_ERR_UNKNOWN_KEY, "undefined symbol '%s'; did you mean "
                           "'%s'?", word, best);
        return asm_err(c, t->pos, NP_ERR_UNKNOWN_KEY, "undefined symbol '%s'", word);
    }
    asm_sym *y = &as->syms[idx];
    if (y->kind == SYM_LABEL) {
        if (as->pass == 1)
            return asm_err(c, t->pos, NP_ERR_INCONSISTENT, "label '%s' cannot be used here: "
                           "addresses are assigned after the whole file is read", y->name);
        *v = y->val;
        return NP_OK;
    }
    TRY(asm_equ_eval(c, t, y));
    *v = as->syms[idx].val;
    return NP_OK;
}

static np_status ex_unary(asm_cur *c, asm_val *v);

static np_status ex_primary(asm_cur *c, asm_val *v)
{
    asm_tok t;
    char b[64];
    TRY(asm_lex(c, &t));
    switch (t.kind) {
    case TK_NUM:
        *v = t.num;
        return NP_OK;
    case TK_IDENT: {
        bool is_reg;
        unsigned r;
        TRY(asm_register(c, &t, &is_reg, &r));
        if (is_reg)
            return asm_err(c, t.pos, NP_ERR_TYPE, "expected a number, got register '%.*s'",
                           (int)t.len, c->s + t.pos);
        asm_tok n;
        TRY(asm_peek(c, &n));
        if ((asm_tok_is(c, &t, "spad") || asm_tok_is(c, &t, "hbm") || asm_tok_is(c, &t, "acc")) &&
            asm_is(&n, "["))
            return asm_err(c, t.pos, NP_ERR_TYPE, "expected a number, got an address");
        return asm_symbol_value(c, &t, v);
    }
    case TK_STR:
        return asm_err(c, t.pos, NP_ERR_TYPE, "expected a number, got a string");
    case TK_PUNCT:
        if (asm_is(&t, "(")) {
            if (++c->as->nesting > ASM_MAX_NESTING)
                return asm_err(c, t.pos, NP_ERR_RANGE, "expression nested more than %d deep",
                               ASM_MAX_NESTING);
            TRY(ex_or(c, v));
            c->as->nesting--;
            return asm_expect(c, ")", "to close '('");
        }
        break;
    default:
        break;
    }
    return asm_err(c, t.pos, NP_ERR_SYNTAX, "expected a number, got %s",
                   asm_tok_text(c, &t, b, sizeof b));
}

static np_status ex_unary(asm_cur *c, asm_val *v)
{
    asm_tok t;
    TRY(asm_peek(c, &t));
    if (asm_is(&t, "-") || asm_is(&t, "+") || asm_is(&t, "~")) {
        asm_lex(c, &t);
        if (++c->as->nesting > ASM_MAX_NESTING)
            return asm_err(c, t.pos, NP_ERR_RANGE, "expression nested more than %d deep",
                           ASM_MAX_NESTING);
        TRY(ex_unary(c, v));
        c->as->nesting--;
        if (t.p[0] == '-') {
            if (v->is_float)
                v->f = -v->f;
            else
                v->i = (int64_t)(0 - (uint64_t)v->i);
        } else if (t.p[0] == '~') {
            if (v->is_float)
                return asm_err(c, t.pos, NP_ERR_TYPE, "operator '~' needs an integer");
            v->i = ~v->i;
        }
        return NP_OK;
    }
    return ex_primary(c, v);
}

static np_status ex_apply(asm_cur *c, const asm_tok *op, asm_val *a, asm_val b)
{
    char o = op->p[0];
    bool shift = op->len == 2;
    if (a->is_float || b.is_float) {
        if (shift || strchr("%&|^", o))
            return asm_err(c, op->pos, NP_ERR_TYPE, "operator '%s' needs integers", op->p);
        double x = a->is_float ? a->f : (double)a->i, y = b.is_float ? b.f : (double)b.i;
        if (o == '/' && y == 0)
            return asm_err(c, op->pos, NP_ERR_RANGE, "division by zero");
        a->is_float = true;
        a->f = o == '+' ? x + y : o == '-' ? x - y : o == '*' ? x * y : x / y;
        return NP_OK;
    }
    uint64_t x = (uint64_t)a->i, y = (uint64_t)b.i;
    if (shift) {
        if (b.i < 0 || b.i > 63)
            return asm_err(c, op->pos, NP_ERR_RANGE, "shift by %" PRId64 " (allowed 0..63)", b.i);
        if (o == '<')
            a->i = (int64_t)(x << b.i);
        else
            a->i = a->i < 0 ? ~(int64_t)(~x >> b.i) : (int64_t)(x >> b.i);
        return NP_OK;
    }
    switch (o) {
    case '+': a->i = (int64_t)(x + y); break;
    case '-': a->i = (int64_t)(x - y); break;
    case '*': a->i = (int64_t)(x * y); break;
    case '&': a->i = (int64_t)(x & y); break;
    case '|': a->i = (int64_t)(x | y); break;
    case '^': a->i = (int64_t)(x ^ y); break;
    case '/':
    case '%':
        if (b.i == 0)
            return asm_err(c, op->pos, NP_ERR_RANGE, "division by zero");
        if (a->i == INT64_MIN && b.i == -1)
            a->i = o == '/' ? INT64_MIN : 0;
        else
            a->i = o == '/' ? a->i / b.i : a->i % b.i;
        break;
    default:
        break;
    }
    return NP_OK;
}

/* One binary precedence level: operands parsed by next, operators in ops (NULL-ended). */
static np_status ex_level(asm_cur *c, asm_val *v, np_status (*next)(asm_cur *, asm_val *),
                          const char *const *ops)
{
    TRY(next(c, v));
    for (;;) {
        asm_tok t;
        TRY(asm_peek(c, &t));
        bool match = false;
        for (const char *const *o = ops; *o && !match; o++)
            match = asm_is(&t, *o);
        if (!match)
            return NP_OK;
        asm_lex(c, &t);
        asm_val b;
        TRY(next(c, &b));
        TRY(ex_apply(c, &t, v, b));
    }
}

static np_status ex_mul(asm_cur *c, asm_val *v)
{
    static const char *const ops[] = {"*", "/", "%", NULL};
    return ex_level(c, v, ex_unary, ops);
}

static np_status ex_add(asm_cur *c, asm_val *v)
{
    static const char *const ops[] = {"+", "-", NULL};
    return ex_level(c, v, ex_mul, ops);
}

static np_status ex_shift(asm_cur *c, asm_val *v)
{
    static const char *const ops[] = {"<<", ">>", NULL};
    return ex_level(c, v, ex_add, ops);
}

static np_status ex_and(asm_cur *c, asm_val *v)
{
    static const char *const ops[] = {"&", NULL};
    return ex_level(c, v, ex_shift, ops);
}

static np_status ex_xor(asm_cur *c, asm_val *v)
{
    static const char *const ops[] = {"^", NULL};
    return ex_level(c, v, ex_and, ops);
}

static np_status ex_or(asm_cur *c, asm_val *v)
{
    static const char *const ops[] = {"|", NULL};
    return ex_level(c, v, ex_xor, ops);
}

/* An integer expression (a float is a TYPE error naming what). */
static np_status asm_int(asm_cur *c, const char *what, int64_t *out)
{
    asm_tok t;
    TRY(asm_peek(c, &t));
    asm_val v;
    TRY(ex_or(c, &v));
    if (v.is_float)
        return asm_err(c, t.pos, NP_ERR_TYPE, "%s: expected an integer, got %g", what, v.f);
    *out = v.i;
    return NP_OK;
}

/* ---- Operands ---------------------------------------------------------------------------------- */

/* The source text of the operand starting at pos, for messages: up to the next top-level
 * comma or the end of the line, at most 40 characters. */
static const char *asm_operand_text(const asm_cur *c, size_t pos, char *buf, size_t n)
{
    size_t i = pos;
    int depth = 0;
    bool str = false;
    for (; i < c->n; i++) {
        char ch = c->s[i];
        if (str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                str = false;
            continue;
        }
        if (ch == '"')
            str = true;
        else if (ch == '(' || ch == '[')
            depth++;
        else if ((ch == ')' || ch == ']') && depth > 0)
            depth--;
        else if ((ch == ',' && depth == 0) || ch == ';' || ch == '#')
            break;
    }
    if (i > c->n)
        i = c->n;
    while (i > pos && isspace((unsigned char)c->s[i - 1]))
        i--;
    size_t len = i - pos;
    if (len > 40)
        snprintf(buf, n, "%.37s...", c->s + pos);
    else
        snprintf(buf, n, "%.*s", (int)len, c->s + pos);
    return buf;
}

static const char *asm_kind_expects(isa_kind k)
{
    switch (k) {
    case ISA_KIND_SPAD: return "a scratchpad address spad[...]";
    case ISA_KIND_ACC: return "an accumulator address acc[...]";
    case ISA_KIND_SPADOPT: return "a scratchpad address spad[...] or none";
    case ISA_KIND_MEM: return "a scratchpad or HBM address spad[...] or hbm[...]";
    case ISA_KIND_REG: return "a register r0..r15";
    case ISA_KIND_STEP: return "a register step rN+=expr or rN-=expr";
    case ISA_KIND_VAL: return "a value rN+expr, rN-expr or expr";
    case ISA_KIND_NAME: return "a string \"...\"";
    case ISA_KIND_PEER: return "a core peer(chip, core) or peer(gG[index], core)";
    default: return "a value";
    }
}

static np_status asm_wrong_kind(asm_cur *c, isa_op op, const isa_field *f, size_t pos)
{
    char text[64];
    return asm_err(c, pos, NP_ERR_TYPE, "operand '%s' of %s: expected %s, got '%s'", f->name,
                   isa_ops[op].mnemonic, asm_kind_expects(f->kind),
                   asm_operand_text(c, pos, text, sizeof text));
}

/* After "rN" of a group index: an optional signed offset (a whole expression with its sign,
 * so that rank-1+2 is rank+1) into *off. */
static np_status asm_peer_offset(asm_cur *c, const char *what, int64_t *off)
{
    asm_tok t;
    TRY(asm_peek(c, &t));
    *off = 0;
    if (!asm_is(&t, "+") && !asm_is(&t, "-"))
        return NP_OK;
    return asm_int(c, what, off);
}

/* x of a group index (isa.def's PEER forms): rN, rN+expr, rN-expr or expr, into reg and val. */
static np_status asm_peer_x(asm_cur *c, const char *what, isa_opnd *o)
{
    asm_tok t;
    bool is_reg;
    unsigned r = 0;
    TRY(asm_peek(c, &t));
    TRY(asm_register(c, &t, &is_reg, &r));
    if (!is_reg)
        return asm_int(c, what, &o->val);
    asm_lex(c, &t);
    o->reg = (uint8_t)r;
    return asm_peer_offset(c, what, &o->val);
}

/* "gG[index]" of a PEER operand, if that is what comes (*group; else nothing is consumed):
 * index is rank, rank+x, rank-expr, rank^x, rank^(rN+expr) or x. */
static np_status asm_peer_group(asm_cur *c, const char *what, isa_opnd *o, bool *group)
{
    size_t save = c->i;
    asm_tok t, b;
    *group = false;
    TRY(asm_lex(c, &t));
    TRY(asm_peek(c, &b));
    if (t.kind != TK_IDENT || t.len < 2 || c->s[t.pos] != 'g' || !asm_is(&b, "[")) {
        c->i = save;
        return NP_OK;
    }
    unsigned g = 0;
    for (size_t k = 1; k < t.len; k++) {
        if (!isdigit((unsigned char)c->s[t.pos + k])) {
            c->i = save;
            return NP_OK;
        }
        g = g < 1000 ? g * 10 + (unsigned)(c->s[t.pos + k] - '0') : g;
    }
    if (g >= ISA_N_GROUPS)
        return asm_err(c, t.pos, NP_ERR_RANGE, "%s: group '%.*s' does not exist (g0..g%d)",
                       what, (int)t.len, c->s + t.pos, ISA_N_GROUPS - 1);
    *group = true;
    asm_lex(c, &b);
    o->group = (uint8_t)g;
    TRY(asm_peek(c, &t));
    if (!asm_tok_is(c, &t, "rank")) {
        o->form = ISA_PEER_FORM_RANK;
        TRY(asm_peer_x(c, what, o));
        return asm_expect(c, "]", "to close the group index");
    }
    asm_lex(c, &t);
    TRY(asm_peek(c, &t));
    o->form = ISA_PEER_FORM_ADD;
    if (asm_is(&t, "^")) {
        o->form = ISA_PEER_FORM_XOR;
        asm_lex(c, &t);
        TRY(asm_peek(c, &t));
        bool paren = asm_is(&t, "(");
        size_t inner = c->i;
        if (paren) {
            asm_lex(c, &t);
            TRY(asm_peek(c, &b));
            bool is_reg;
            unsigned r;
            TRY(asm_register(c, &b, &is_reg, &r));
            if (!is_reg)
                c->i = inner; /* a parenthesized expression: the expression parser's */
        }
        TRY(asm_peer_x(c, what, o));
        if (paren && c->i != inner && o->reg)
            TRY(asm_expect(c, ")", "to close rank^(rN+expr)"));
    } else if (asm_is(&t, "+")) {
        asm_lex(c, &t);
        TRY(asm_peer_x(c, what, o));
    } else if (asm_is(&t, "-")) {
        size_t at = c->i;
        asm_lex(c, &t);
        TRY(asm_peek(c, &b));
        bool is_reg;
        unsigned r;
        TRY(asm_register(c, &b, &is_reg, &r));
        if (is_reg)
            return asm_err(c, b.pos, NP_ERR_SYNTAX, "%s: a register can only be added to the "
                           "rank (rank+rN)", what);
        c->i = at;
        TRY(asm_int(c, what, &o->val)); /* with its sign */
    } else if (!asm_is(&t, "]")) {
        char tb[64];
        return asm_err(c, t.pos, NP_ERR_SYNTAX, "%s: expected '+', '-', '^' or ']' after rank, "
                       "got %s", what, asm_tok_text(c, &t, tb, sizeof tb));
    }
    return asm_expect(c, "]", "to close the group index");
}

static np_status asm_addr(asm_cur *c, isa_op op, const isa_field *f, size_t pos, isa_opnd *o)
{
    asm_tok t, b;
    TRY(asm_lex(c, &t));
    if (f->kind == ISA_KIND_SPADOPT && asm_tok_is(c, &t, "none")) {
        *o = (isa_opnd){0};
        return NP_OK;
    }
    int space = asm_tok_is(c, &t, "spad") ? ISA_SPACE_SPAD
                : asm_tok_is(c, &t, "hbm") ? ISA_SPACE_HBM
                : asm_tok_is(c, &t, "acc") ? ISA_SPACE_ACC : ISA_SPACE_NONE;
    TRY(asm_peek(c, &b));
    if (space == ISA_SPACE_NONE || !asm_is(&b, "["))
        return asm_wrong_kind(c, op, f, pos);
    bool ok = (f->kind == ISA_KIND_SPAD || f->kind == ISA_KIND_SPADOPT) ? space == ISA_SPACE_SPAD
              : f->kind == ISA_KIND_ACC ? space == ISA_SPACE_ACC
              : space == ISA_SPACE_SPAD || space == ISA_SPACE_HBM;
    if (!ok)
        return asm_wrong_kind(c, op, f, pos);
    asm_lex(c, &b);
    asm_tok r;
    TRY(asm_peek(c, &r));
    bool is_reg;
    unsigned reg = 0;
    TRY(asm_register(c, &r, &is_reg, &reg));
    int64_t off = 0;
    if (is_reg) {
        asm_lex(c, &r);
        TRY(asm_peek(c, &r));
        if (asm_is(&r, "+")) {
            asm_lex(c, &r);
            TRY(asm_int(c, "address offset", &off));
        } else if (!asm_is(&r, "]")) {
            char tb[64];
            return asm_err(c, r.pos, NP_ERR_SYNTAX, "expected '+' or ']' after the register, "
                           "got %s", asm_tok_text(c, &r, tb, sizeof tb));
        }
    } else {
        TRY(asm_int(c, "address", &off));
    }
    TRY(asm_expect(c, "]", "to close the address"));
    *o = (isa_opnd){.val = off, .reg = (uint8_t)reg, .space = (uint8_t)space};
    return NP_OK;
}

/* v as a binary32 (RANGE error naming what when it overflows). */
static np_status asm_to_f32(asm_cur *c, size_t pos, const char *what, asm_val v, float *out)
{
    double d = v.is_float ? v.f : (double)v.i;
    if (!isfinite(d) || fabs(d) >= 0x1.ffffffp127) /* rounds to infinity */
        return asm_err(c, pos, NP_ERR_RANGE, "%s: %g does not fit fp32", what, d);
    *out = (float)d;
    return NP_OK;
}

static np_status asm_f32(asm_cur *c, isa_op op, const isa_field *f, size_t pos, isa_opnd *o)
{
    asm_tok t, n;
    TRY(asm_peek(c, &t));
    if (asm_tok_is(c, &t, "bits")) {
        asm_lex(c, &t);
        TRY(asm_peek(c, &n));
        if (asm_is(&n, "(")) {
            asm_lex(c, &n);
            int64_t v = 0;
            TRY(asm_int(c, "bits()", &v));
            TRY(asm_expect(c, ")", "to close bits("));
            if (v < 0 || v > 0xffffffff)
                return asm_err(c, pos, NP_ERR_RANGE, "operand '%s' of %s: bits(0x%" PRIx64
                               ") does not fit 32 bits", f->name, isa_ops[op].mnemonic,
                               (uint64_t)v);
            *o = isa_imm(v);
            return NP_OK;
        }
        c->i = t.pos;
    }
    asm_val v;
    TRY(ex_or(c, &v));
    char what[96];
    snprintf(what, sizeof what, "operand '%s' of %s", f->name, isa_ops[op].mnemonic);
    float x = 0;
    TRY(asm_to_f32(c, pos, what, v, &x));
    *o = isa_f32(x);
    return NP_OK;
}

/* Parses operand fi of op at the cursor into *o (not yet range-checked). */
static np_status asm_operand(asm_cur *c, isa_op op, unsigned fi, uint32_t insn, isa_opnd *o)
{
    const isa_field *f = &isa_ops[op].fields[fi];
    asm_tok t;
    TRY(asm_peek(c, &t));
    size_t pos = t.pos;
    char what[96], tb[64];
    snprintf(what, sizeof what, "operand '%s' of %s", f->name, isa_ops[op].mnemonic);
    bool is_reg;
    unsigned r = 0;
    *o = (isa_opnd){0};
    switch (f->kind) {
    case ISA_KIND_REG:
        TRY(asm_register(c, &t, &is_reg, &r));
        if (!is_reg)
            return asm_wrong_kind(c, op, f, pos);
        asm_lex(c, &t);
        o->reg = (uint8_t)r;
        return NP_OK;
    case ISA_KIND_STEP: {
        TRY(asm_register(c, &t, &is_reg, &r));
        if (!is_reg)
            return asm_wrong_kind(c, op, f, pos);
        asm_lex(c, &t);
        asm_tok s;
        TRY(asm_lex(c, &s));
        if (!asm_is(&s, "+=") && !asm_is(&s, "-="))
            return asm_err(c, s.pos, NP_ERR_SYNTAX, "expected '+=' or '-=' after the register, "
                           "got %s", asm_tok_text(c, &s, tb, sizeof tb));
        int64_t v = 0;
        TRY(asm_int(c, what, &v));
        o->reg = (uint8_t)r;
        o->val = s.p[0] == '-' ? (int64_t)(0 - (uint64_t)v) : v;
        return NP_OK;
    }
    case ISA_KIND_VAL: {
        TRY(asm_register(c, &t, &is_reg, &r));
        if (!is_reg)
            return asm_int(c, what, &o->val);
        asm_lex(c, &t);
        o->reg = (uint8_t)r;
        asm_tok s;
        TRY(asm_peek(c, &s));
        if (!asm_is(&s, "+") && !asm_is(&s, "-"))
            return NP_OK; /* rN alone: offset 0 */
        asm_lex(c, &s);
        int64_t v = 0;
        TRY(asm_int(c, what, &v));
        o->val = s.p[0] == '-' ? (int64_t)(0 - (uint64_t)v) : v;
        return NP_OK;
    }
    case ISA_KIND_SPAD:
    case ISA_KIND_ACC:
    case ISA_KIND_SPADOPT:
    case ISA_KIND_MEM:
        return asm_addr(c, op, f, pos, o);
    case ISA_KIND_F32:
        return asm_f32(c, op, f, pos, o);
    case ISA_KIND_NAME: {
        if (t.kind != TK_STR)
            return asm_wrong_kind(c, op, f, pos);
        asm_lex(c, &t);
        char *s = NULL;
        size_t len = 0;
        TRY(asm_string(c, &t, &s, &len));
        if (len == 0) { /* the ELF's name table holds no empty name (isa_elf.h) */
            free(s);
            return asm_err(c, pos, NP_ERR_RANGE, "%s: the name is empty", what);
        }
        if (len > ISA_ASM_MAX_NAME) {
            free(s);
            return asm_err(c, pos, NP_ERR_RANGE, "%s: the name is %zu bytes long (at most %d)",
                           what, len, ISA_ASM_MAX_NAME);
        }
        asm_state *as = c->as;
        if (!ISA_GROW(as->names, as->cap_names, as->n_names + 1)) {
            free(s);
            return asm_nomem(as);
        }
        as->names[as->n_names++] = (asm_nameref){s, 0, insn, fi}; /* sec: set by asm_insn */
        return NP_OK;
    }
    case ISA_KIND_PEER: {
        asm_tok p;
        if (!asm_tok_is(c, &t, "peer"))
            return asm_wrong_kind(c, op, f, pos);
        asm_lex(c, &t);
        TRY(asm_peek(c, &p));
        if (!asm_is(&p, "("))
            return asm_wrong_kind(c, op, f, pos);
        asm_lex(c, &p);
        bool group;
        TRY(asm_peer_group(c, what, o, &group));
        if (!group) {
            int64_t chip = 0;
            TRY(asm_int(c, what, &chip));
            o->val = chip;
        }
        TRY(asm_expect(c, ",", group ? "between the group member and core" : "between chip and core"));
        TRY(asm_peek(c, &p));
        int64_t core = 0;
        TRY(asm_int(c, what, &core));
        TRY(asm_expect(c, ")", "to close peer("));
        if (core < 0 || core > 0xffff)
            return asm_err(c, p.pos, NP_ERR_RANGE, "%s: core %" PRId64 " is out of range "
                           "0..65535", what, core);
        o->core = (uint32_t)core;
        return NP_OK;
    }
    case ISA_KIND_SEM:
        if (t.kind == TK_IDENT && t.len >= 2 && c->s[t.pos] == 's') {
            bool digits = true;
            int64_t v = 0;
            for (size_t k = 1; k < t.len; k++) {
                digits = digits && isdigit((unsigned char)c->s[t.pos + k]);
                if (digits && v < 100000)
                    v = v * 10 + (c->s[t.pos + k] - '0');
            }
            if (digits) {
                asm_lex(c, &t);
                o->val = v;
                return NP_OK;
            }
        }
        return asm_int(c, what, &o->val);
    case ISA_KIND_UNIT:
    case ISA_KIND_DTYPE:
    case ISA_KIND_ACT:
    case ISA_KIND_BCAST:
    case ISA_KIND_RED:
    case ISA_KIND_ACCM: {
        unsigned nv;
        const char *const *values = isa_kind_values_of(f->kind, &nv);
        char word[64], kind[16];
        snprintf(kind, sizeof kind, "%s", isa_kinds[f->kind].name);
        for (char *k = kind; *k; k++)
            *k = (char)tolower((unsigned char)*k);
        if (t.kind != TK_IDENT) {
            char text[64];
            return asm_err(c, pos, NP_ERR_TYPE, "%s: expected a %s (%s), got '%s'", what, kind,
                           isa_kinds[f->kind].syntax, asm_operand_text(c, pos, text, sizeof text));
        }
        asm_lex(c, &t);
        snprintf(word, sizeof word, "%.*s", (int)(t.len < 63 ? t.len : 63), c->s + t.pos);
        for (unsigned k = 0; k < nv; k++)
            if (t.len == strlen(values[k]) && memcmp(c->s + t.pos, values[k], t.len) == 0) {
                o->val = k;
                return NP_OK;
            }
        const char *best = np_suggest(word, values, nv, 2);
        if (best)
            return asm_err(c, pos, NP_ERR_UNKNOWN_KEY, "%s: unknown %s '%s'; did you mean "
                           "'%s'?", what, kind, word, best);
        return asm_err(c, pos, NP_ERR_UNKNOWN_KEY, "%s: unknown %s '%s' (%s)", what, kind,
                       word, isa_kinds[f->kind].syntax);
    }
    default:
        return asm_int(c, what, &o->val);
    }
}

/* ---- Pass 2: instructions and data ------------------------------------------------------------- */

static np_status asm_insn(asm_state *as, const asm_stmt *st)
{
    asm_cur c = {as, st->text, st->text_len, st->pos, st->line};
    isa_op op = (isa_op)st->what;
    const isa_op_info *info = &isa_ops[op];
    asm_core *core = &as->cores[st->sec];
    isa_insn *in = &core->insns[st->off];
    isa_insn_init(in, op);
    bool given[ISA_MAX_OPNDS] = {false};
    unsigned next = 0;
    bool named = false;
    size_t names_before = as->n_names;
    asm_tok t;
    char tb[64];
    TRY(asm_peek(&c, &t));
    while (t.kind != TK_EOL) {
        size_t pos = t.pos;
        int fi = -1;
        if (t.kind == TK_IDENT) {
            size_t save = c.i;
            asm_tok eq;
            asm_lex(&c, &t);
            TRY(asm_peek(&c, &eq));
            if (asm_is(&eq, "=")) {
                char word[64];
                snprintf(word, sizeof word, "%.*s", (int)(t.len < 63 ? t.len : 63), c.s + t.pos);
                fi = isa_field_find(op, word);
                if (fi < 0) {
                    const char *names[ISA_MAX_OPNDS];
                    for (unsigned k = 0; k < info->n_fields; k++)
                        names[k] = info->fields[k].name;
                    const char *best = np_suggest(word, names, info->n_fields, 2);
                    if (best)
                        return asm_err(&c, pos, NP_ERR_UNKNOWN_KEY, "%s has no operand '%s'; "
                                       "did you mean '%s'?", info->mnemonic, word, best);
                    return asm_err(&c, pos, NP_ERR_UNKNOWN_KEY, "%s has no operand '%s'",
                                   info->mnemonic, word);
                }
                if (given[fi])
                    return asm_err(&c, pos, NP_ERR_DUPLICATE, "operand '%s' of %s is given twice",
                                   word, info->mnemonic);
                asm_lex(&c, &eq);
                named = true;
                TRY(asm_peek(&c, &t));
                pos = t.pos;
            } else {
                c.i = save;
            }
        }
        if (fi < 0) {
            if (named)
                return asm_err(&c, pos, NP_ERR_SYNTAX, "positional operand after name=value "
                               "operands");
            if (next >= info->n_fields && info->n_fields == 0)
                return asm_err(&c, pos, NP_ERR_SYNTAX, "%s takes no operands", info->mnemonic);
            if (next >= info->n_fields)
                return asm_err(&c, pos, NP_ERR_SYNTAX, "too many operands: %s takes at most %u",
                               info->mnemonic, info->n_fields);
            fi = (int)next++;
        }
        TRY(asm_operand(&c, op, (unsigned)fi, (uint32_t)st->off, &in->opnd[fi]));
        given[fi] = true;
        if (isa_operand_check(op, (unsigned)fi, &in->opnd[fi], as->err) != NP_OK)
            return asm_place(&c, pos);
        TRY(asm_lex(&c, &t));
        if (t.kind == TK_EOL)
            break;
        if (!asm_is(&t, ","))
            return asm_err(&c, t.pos, NP_ERR_SYNTAX, "expected ',' or end of line after an "
                           "operand, got %s", asm_tok_text(&c, &t, tb, sizeof tb));
        TRY(asm_peek(&c, &t));
        if (t.kind == TK_EOL)
            return asm_err(&c, t.pos, NP_ERR_SYNTAX, "expected an operand after ','");
    }
    for (unsigned k = 0; k < info->n_fields; k++)
        if (!info->fields[k].optional && !given[k])
            return asm_err(&c, (size_t)st->col - 1, NP_ERR_MISSING, "%s: missing operand '%s' "
                           "(%s)", info->mnemonic, info->fields[k].name,
                           isa_kinds[info->fields[k].kind].syntax);
    for (size_t k = names_before; k < as->n_names; k++)
        as->names[k].sec = st->sec;
    /* The array's dtypes must be the target's. */
    if (info->unit == ISA_UNIT_MXU && op != ISA_OP_MXU_DRAIN) {
        int d = isa_field_find(op, "dtype");
        if (d >= 0 && !(as->target.dtypes & (1u << in->opnd[d].val))) {
            char have[64];
            return asm_err(&c, (size_t)st->col - 1, NP_ERR_INCONSISTENT, "%s: the target's "
                           "array does not multiply %s (it does %s)", info->mnemonic,
                           isa_dtype_names[in->opnd[d].val],
                           isa_dtypes_text(as->target.dtypes, have, sizeof have));
        }
    }
    return NP_OK;
}

static const struct {
    const char *name;
    unsigned width;
} asm_data_kinds[] = {
    [D_BYTE] = {".byte", 1}, [D_HALF] = {".half", 2}, [D_WORD] = {".word", 4},
    [D_DWORD] = {".dword", 8}, [D_FLOAT] = {".float", 4}, [D_BF16] = {".bf16", 2},
    [D_FP16] = {".fp16", 2},
};

uint16_t isa_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40); /* NaN stays a (quiet) NaN */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

uint16_t isa_f32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000;
        unsigned shift = (unsigned)(14 - e);
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | (uint32_t)e << 10 | mant >> 13, rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)h;
}

static np_status asm_data(asm_state *as, const asm_stmt *st)
{
    asm_cur c = {as, st->text, st->text_len, st->pos, st->line};
    unsigned w = asm_data_kinds[st->what].width;
    uint8_t *dst = as->data + st->off;
    for (;;) {
        asm_tok t;
        TRY(asm_peek(&c, &t));
        asm_val v;
        TRY(ex_or(&c, &v));
        uint64_t bits;
        if (st->what == D_FLOAT || st->what == D_BF16 || st->what == D_FP16) {
            float x = 0;
            TRY(asm_to_f32(&c, t.pos, asm_data_kinds[st->what].name, v, &x));
            uint32_t fb;
            memcpy(&fb, &x, sizeof fb);
            bits = st->what == D_FLOAT ? fb : st->what == D_BF16 ? isa_f32_to_bf16(x)
                                                                  : isa_f32_to_fp16(x);
            /* a finite value that rounds to infinity does not fit, as for .float */
            bool inf16 = st->what == D_BF16 ? (bits & 0x7fff) == 0x7f80
                                            : st->what == D_FP16 && (bits & 0x7fff) == 0x7c00;
            if (inf16)
                return asm_err(&c, t.pos, NP_ERR_RANGE, "%s: %g does not fit %s (largest "
                               "finite %s)", asm_data_kinds[st->what].name, (double)x,
                               st->what == D_BF16 ? "bf16" : "fp16",
                               st->what == D_BF16 ? "3.3895314e38" : "65504");
        } else {
            if (v.is_float)
                return asm_err(&c, t.pos, NP_ERR_TYPE, "%s: expected an integer, got %g",
                               asm_data_kinds[st->what].name, v.f);
            if (w < 8) {
                int64_t lo = -((int64_t)1 << (8 * w - 1)), hi = ((int64_t)1 << (8 * w)) - 1;
                if (v.i < lo || v.i > hi)
                    return asm_err(&c, t.pos, NP_ERR_RANGE, "%s: %" PRId64 " is out of range "
                                   "%" PRId64 "..%" PRId64, asm_data_kinds[st->what].name, v.i,
                                   lo, hi);
            }
            bits = (uint64_t)v.i;
        }
        for (unsigned b = 0; b < w; b++)
            *dst++ = (uint8_t)(bits >> (8 * b));
        TRY(asm_lex(&c, &t));
        if (t.kind == TK_EOL)
            return NP_OK;
        if (!asm_is(&t, ",")) {
            char tb[64];
            return asm_err(&c, t.pos, NP_ERR_SYNTAX, "expected ',' or end of line, got %s",
                           asm_tok_text(&c, &t, tb, sizeof tb));
        }
    }
}

static np_status asm_size(asm_state *as, const asm_stmt *st)
{
    asm_cur c = {as, st->text, st->text_len, st->pos, st->line};
    asm_sym *y = &as->syms[st->what];
    asm_tok t;
    TRY(asm_peek(&c, &t));
    int64_t v = 0;
    TRY(asm_int(&c, ".size", &v));
    TRY(asm_expect_eol(&c, ".size"));
    uint64_t sec_size = y->sec == SEC_DATA ? as->data_size : as->bss_size;
    if (v < 0 || (uint64_t)v > sec_size - y->off)
        return asm_err(&c, t.pos, NP_ERR_RANGE, ".size: %" PRId64 " bytes from '%s' would end "
                       "outside its section (at most %" PRIu64 ")", v, y->name,
                       sec_size - y->off);
    y->has_size = true;
    y->size = v;
    return NP_OK;
}

/* ---- Pass 1: lines, directives, layout --------------------------------------------------------- */

static np_status asm_core_slot(asm_cur *c, uint32_t core, int line, int col, int *slot)
{
    asm_state *as = c->as;
    for (size_t k = 0; k < as->n_cores; k++)
        if (as->cores[k].core == core) {
            if (!as->cores[k].line && line) {
                as->cores[k].line = line;
                as->cores[k].col = col;
            }
            *slot = (int)k;
            return NP_OK;
        }
    if (!ISA_GROW(as->cores, as->cap_cores, as->n_cores + 1))
        return asm_nomem(as);
    asm_core *k = &as->cores[as->n_cores];
    memset(k, 0, sizeof *k);
    k->core = core;
    k->line = line;
    k->col = col;
    *slot = (int)as->n_cores++;
    return NP_OK;
}

/* The current section as a core slot, opening core 0 when nothing was chosen yet. */
static np_status asm_text_section(asm_cur *c, size_t pos, const char *what, int *slot)
{
    asm_state *as = c->as;
    if (as->sec == SEC_NONE)
        TRY(asm_core_slot(c, 0, 0, 0, &as->sec));
    if (as->sec < 0)
        return asm_err(c, pos, NP_ERR_SYNTAX, "%s in a data section (switch with .core N)", what);
    *slot = as->sec;
    return NP_OK;
}

static np_status asm_stmt_add(asm_cur *c, int kind, int what, const asm_tok *t, size_t pos,
                              int sec, uint64_t off)
{
    asm_state *as = c->as;
    if (!ISA_GROW(as->stmts, as->cap_stmts, as->n_stmts + 1))
        return asm_nomem(as);
    as->stmts[as->n_stmts++] = (asm_stmt){kind, what, c->line, (int)t->pos + 1, c->s, c->n, pos,
                                          sec, off};
    return NP_OK;
}

static np_status asm_target(asm_cur *c, const asm_tok *dir)
{
    asm_state *as = c->as;
    if (as->have_target)
        return asm_err(c, dir->pos, NP_ERR_DUPLICATE, ".target is already given at line %d",
                       as->target_line);
    static const char *const keys[] = {"rows", "cols", "cores", "spad", "acc", "dtypes"};
    enum { NK = sizeof keys / sizeof keys[0] };
    bool seen[NK] = {false};
    isa_target t = {0};
    for (;;) {
        asm_tok k, v;
        char tb[64];
        TRY(asm_lex(c, &k));
        int ki = -1;
        for (int i = 0; i < NK; i++)
            if (asm_tok_is(c, &k, keys[i]))
                ki = i;
        if (ki < 0) {
            if (k.kind != TK_IDENT)
                return asm_err(c, k.pos, NP_ERR_SYNTAX, "expected a .target key (rows, cols, "
                               "cores, spad, acc, dtypes), got %s", asm_tok_text(c, &k, tb, sizeof tb));
            char word[64];
            snprintf(word, sizeof word, "%.*s", (int)(k.len < 63 ? k.len : 63), c->s + k.pos);
            const char *best = np_suggest(word, keys, NK, 2);
            return asm_err(c, k.pos, NP_ERR_UNKNOWN_KEY, "unknown .target key '%s'%s%s%s", word,
                           best ? "; did you mean '" : " (rows, cols, cores, spad, acc, dtypes)",
                           best ? best : "", best ? "'?" : "");
        }
        if (seen[ki])
            return asm_err(c, k.pos, NP_ERR_DUPLICATE, ".target key '%s' is given twice",
                           keys[ki]);
        seen[ki] = true;
        TRY(asm_expect(c, "=", "after the .target key"));
        if (ki == 5) {
            TRY(asm_peek(c, &v));
            bool none = asm_tok_is(c, &v, "none"); /* an array that multiplies nothing */
            if (none)
                asm_lex(c, &v);
            while (!none) {
                TRY(asm_lex(c, &v));
                int d = -1;
                for (int i = 0; i < ISA_DTYPE_COUNT; i++)
                    if (asm_tok_is(c, &v, isa_dtype_names[i]))
                        d = i;
                if (d < 0)
                    return asm_err(c, v.pos, NP_ERR_UNKNOWN_KEY, "expected a dtype (%s), got %s",
                                   isa_kinds[ISA_KIND_DTYPE].syntax,
                                   asm_tok_text(c, &v, tb, sizeof tb));
                t.dtypes |= 1u << d;
                TRY(asm_peek(c, &v));
                if (!asm_is(&v, "|"))
                    break;
                asm_lex(c, &v);
            }
        } else {
            TRY(asm_peek(c, &v));
            int64_t x = 0;
            TRY(asm_int(c, ".target", &x));
            uint64_t hi = ki < 3 ? 0xffffffffu : UINT64_MAX >> 1;
            if (x < 1 || (uint64_t)x > hi)
                return asm_err(c, v.pos, NP_ERR_RANGE, ".target %s: %" PRId64 " is out of range "
                               "1..%" PRIu64, keys[ki], x, hi);
            if (ki == 0) t.array_rows = (uint32_t)x;
            if (ki == 1) t.array_cols = (uint32_t)x;
            if (ki == 2) t.cores = (uint32_t)x;
            if (ki == 3) t.spad_bytes = (uint64_t)x;
            if (ki == 4) t.acc_bytes = (uint64_t)x;
        }
        TRY(asm_lex(c, &v));
        if (v.kind == TK_EOL)
            break;
        if (!asm_is(&v, ","))
            return asm_err(c, v.pos, NP_ERR_SYNTAX, "expected ',' or end of line in .target, "
                           "got %s", asm_tok_text(c, &v, tb, sizeof tb));
    }
    for (int i = 0; i < NK; i++)
        if (!seen[i])
            return asm_err(c, dir->pos, NP_ERR_MISSING, ".target: missing key '%s'", keys[i]);
    as->have_target = true;
    as->target = t;
    as->target_line = c->line;
    as->target_col = (int)dir->pos + 1;
    return NP_OK;
}

static const char *const asm_directives[] = {
    ".equ", ".core", ".kernel", ".endk", ".data", ".bss", ".byte", ".half", ".word", ".dword",
    ".float", ".bf16", ".fp16", ".zero", ".space", ".align", ".size", ".target"};

/* Counts the comma-separated values after pos (at least one). */
static np_status asm_count_values(asm_cur *c, const asm_tok *dir, uint64_t *n)
{
    asm_tok t;
    size_t save = c->i;
    *n = 1;
    int depth = 0;
    TRY(asm_peek(c, &t));
    if (t.kind == TK_EOL)
        return asm_err(c, t.pos, NP_ERR_MISSING, "%.*s needs at least one value", (int)dir->len,
                       c->s + dir->pos);
    for (;;) {
        TRY(asm_lex(c, &t));
        if (t.kind == TK_EOL)
            break;
        if (asm_is(&t, "(") || asm_is(&t, "["))
            depth++;
        else if ((asm_is(&t, ")") || asm_is(&t, "]")) && depth > 0)
            depth--;
        else if (asm_is(&t, ",") && depth == 0)
            (*n)++;
    }
    c->i = save;
    return NP_OK;
}

static np_status asm_directive(asm_cur *c, const asm_tok *dir)
{
    asm_state *as = c->as;
    const char *d = c->s + dir->pos;
    int which = -1;
    for (size_t k = 0; k < sizeof asm_directives / sizeof asm_directives[0]; k++)
        if (asm_tok_is(c, dir, asm_directives[k]))
            which = (int)k;
    char word[64], tb[64];
    snprintf(word, sizeof word, "%.*s", (int)(dir->len < 63 ? dir->len : 63), d);
    if (which < 0) {
        const char *best = np_suggest(word, asm_directives,
                                      sizeof asm_directives / sizeof asm_directives[0], 2);
        if (best)
            return asm_err(c, dir->pos, NP_ERR_UNKNOWN_KEY, "unknown directive '%s'; did you "
                           "mean '%s'?", word, best);
        return asm_err(c, dir->pos, NP_ERR_UNKNOWN_KEY, "unknown directive '%s'", word);
    }
    const char *name = asm_directives[which];
    asm_tok t;
    if (strcmp(name, ".equ") == 0) {
        TRY(asm_lex(c, &t));
        if (t.kind != TK_IDENT)
            return asm_err(c, t.pos, NP_ERR_SYNTAX, "expected a symbol name after .equ, got %s",
                           asm_tok_text(c, &t, tb, sizeof tb));
        long idx;
        TRY(asm_sym_new(c, &t, SYM_EQU, &idx));
        TRY(asm_expect(c, ",", "after the .equ name"));
        TRY(asm_peek(c, &t));
        if (t.kind == TK_EOL)
            return asm_err(c, t.pos, NP_ERR_MISSING, ".equ %s: missing value", as->syms[idx].name);
        as->syms[idx].text = c->s;
        as->syms[idx].text_len = c->n;
        as->syms[idx].pos = c->i;
        return NP_OK;
    }
    if (strcmp(name, ".core") == 0) {
        TRY(asm_peek(c, &t));
        int64_t n = 0;
        TRY(asm_int(c, ".core", &n));
        if (n < 0 || n > 0xffff)
            return asm_err(c, t.pos, NP_ERR_RANGE, ".core %" PRId64 " is out of range 0..65535", n);
        TRY(asm_expect_eol(c, ".core N"));
        return asm_core_slot(c, (uint32_t)n, c->line, (int)dir->pos + 1, &as->sec);
    }
    if (strcmp(name, ".kernel") == 0 || strcmp(name, ".endk") == 0) {
        int slot = 0;
        TRY(asm_text_section(c, dir->pos, name, &slot));
        asm_core *k = &as->cores[slot];
        if (name[2] == 'n') { /* .endk */
            TRY(asm_expect_eol(c, ".endk"));
            if (!k->kernel_open)
                return asm_err(c, dir->pos, NP_ERR_SYNTAX, ".endk without an open .kernel");
            k->kernels[k->n_kernels - 1].count = k->n_insns - k->kernels[k->n_kernels - 1].start;
            k->kernel_open = false;
            return NP_OK;
        }
        TRY(asm_lex(c, &t));
        if (t.kind != TK_IDENT)
            return asm_err(c, t.pos, NP_ERR_SYNTAX, "expected a kernel name after .kernel, got %s",
                           asm_tok_text(c, &t, tb, sizeof tb));
        if (!isa_name_ok(c->s + t.pos, t.len))
            return asm_err(c, t.pos, NP_ERR_SYNTAX, "'%.*s' is a reserved word and cannot name a "
                           "kernel", (int)t.len, c->s + t.pos);
        TRY(asm_expect_eol(c, "the kernel name"));
        long dup = asm_kernel_find(k, c->s + t.pos, t.len);
        if (dup >= 0)
            return asm_err(c, t.pos, NP_ERR_DUPLICATE, "kernel '%s' is already defined on "
                           "core %" PRIu32, k->kernels[dup].name, k->core);
        if (k->kernel_open)
            k->kernels[k->n_kernels - 1].count = k->n_insns - k->kernels[k->n_kernels - 1].start;
        if (!ISA_GROW(k->kernels, k->cap_kernels, k->n_kernels + 1))
            return asm_nomem(as);
        char *kn = malloc(t.len + 1);
        if (!kn)
            return asm_nomem(as);
        memcpy(kn, c->s + t.pos, t.len);
        kn[t.len] = '\0';
        k->kernels[k->n_kernels++] = (isa_kernel){kn, k->n_insns, 0};
        if (!asm_kernel_hash_insert(k, k->n_kernels - 1))
            return asm_nomem(as);
        k->kernel_open = true;
        return NP_OK;
    }
    if (strcmp(name, ".data") == 0 || strcmp(name, ".bss") == 0) {
        bool data = name[1] == 'd';
        TRY(asm_peek(c, &t));
        if (t.kind != TK_EOL) {
            int64_t a = 0;
            TRY(asm_int(c, name, &a));
            if (a < 0 || (uint64_t)a >= ISA_HBM_LIMIT)
                return asm_err(c, t.pos, NP_ERR_RANGE, "%s address %" PRId64 " is out of range "
                               "0..0x%" PRIx64, name, a, ISA_HBM_LIMIT - 1);
            bool *based = data ? &as->data_based : &as->bss_based;
            uint64_t *base = data ? &as->data_base : &as->bss_base;
            int *line = data ? &as->data_line : &as->bss_line;
            if (*based && *base != (uint64_t)a)
                return asm_err(c, t.pos, NP_ERR_DUPLICATE, "%s address is already 0x%" PRIx64
                               " (line %d)", name, *base, *line);
            *based = true;
            *base = (uint64_t)a;
            *line = c->line;
        }
        TRY(asm_expect_eol(c, name));
        if (data)
            as->have_data = true;
        else
            as->have_bss = true;
        as->sec = data ? SEC_DATA : SEC_BSS;
        return NP_OK;
    }
    if (strcmp(name, ".target") == 0)
        return asm_target(c, dir);
    if (strcmp(name, ".size") == 0) {
        TRY(asm_lex(c, &t));
        long idx = t.kind == TK_IDENT ? asm_sym_find(as, c->s + t.pos, t.len) : -1;
        if (idx < 0 || as->syms[idx].kind != SYM_LABEL || as->syms[idx].sec >= 0)
            return asm_err(c, t.pos, NP_ERR_UNKNOWN_KEY, ".size needs a data label defined "
                           "above, got %s", asm_tok_text(c, &t, tb, sizeof tb));
        TRY(asm_expect(c, ",", "after the .size label"));
        return asm_stmt_add(c, ST_SIZE, (int)idx, dir, c->i, SEC_NONE, 0);
    }
    /* Data layout directives. */
    if (as->sec != SEC_DATA && as->sec != SEC_BSS)
        return asm_err(c, dir->pos, NP_ERR_SYNTAX, "%s outside .data or .bss", name);
    uint64_t *size = as->sec == SEC_DATA ? &as->data_size : &as->bss_size;
    uint64_t limit = as->sec == SEC_DATA ? ISA_ASM_MAX_DATA_BYTES : (uint64_t)1 << 48;
    if (strcmp(name, ".zero") == 0 || strcmp(name, ".space") == 0 || strcmp(name, ".align") == 0) {
        TRY(asm_peek(c, &t));
        int64_t n = 0;
        TRY(asm_int(c, name, &n));
        TRY(asm_expect_eol(c, name));
        uint64_t grow;
        if (name[1] == 'a') {
            if (n < 1 || n > 65536 || (n & (n - 1)))
                return asm_err(c, t.pos, NP_ERR_RANGE, ".align %" PRId64 " is not a power of two "
                               "in 1..65536", n);
            grow = (uint64_t)(-(int64_t)*size & (n - 1));
        } else {
            if (n < 0)
                return asm_err(c, t.pos, NP_ERR_RANGE, "%s %" PRId64 " is negative", name, n);
            grow = (uint64_t)n;
        }
        if (grow > limit - *size)
            return asm_err(c, t.pos, NP_ERR_RANGE, "%s makes the section larger than %" PRIu64
                           " bytes", name, limit);
        *size += grow;
        return NP_OK;
    }
    if (as->sec == SEC_BSS)
        return asm_err(c, dir->pos, NP_ERR_SYNTAX, "%s in .bss, which holds no data (use .space)",
                       name);
    int kind = -1;
    for (int k = 0; k <= D_FP16; k++)
        if (strcmp(name, asm_data_kinds[k].name) == 0)
            kind = k;
    uint64_t n;
    TRY(asm_count_values(c, dir, &n));
    uint64_t bytes = n * asm_data_kinds[kind].width;
    if (bytes > limit - *size)
        return asm_err(c, dir->pos, NP_ERR_RANGE, "%s makes .data larger than %" PRIu64 " bytes",
                       name, limit);
    TRY(asm_stmt_add(c, ST_DATA, kind, dir, c->i, SEC_DATA, *size));
    *size += bytes;
    return NP_OK;
}

static np_status asm_label(asm_cur *c, const asm_tok *t)
{
    asm_state *as = c->as;
    if (as->sec == SEC_NONE)
        TRY(asm_core_slot(c, 0, 0, 0, &as->sec));
    long idx;
    TRY(asm_sym_new(c, t, SYM_LABEL, &idx));
    asm_sym *y = &as->syms[idx];
    y->sec = as->sec;
    y->off = as->sec == SEC_DATA ? as->data_size
             : as->sec == SEC_BSS ? as->bss_size
             : (uint64_t)as->cores[as->sec].n_insns * ISA_WORD_BYTES;
    return NP_OK;
}

static np_status asm_mnemonic(asm_cur *c, const asm_tok *t)
{
    asm_state *as = c->as;
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)(t->len < 63 ? t->len : 63), c->s + t->pos);
    isa_op op = isa_op_find(word);
    if (op == ISA_OP_ILLEGAL) {
        const char *cands[ISA_OP_COUNT];
        char lower[64];
        for (size_t k = 0; k <= strlen(word); k++)
            lower[k] = (char)tolower((unsigned char)word[k]);
        for (int k = 1; k < ISA_OP_COUNT; k++)
            cands[k - 1] = isa_ops[k].mnemonic;
        isa_op low = isa_op_find(lower);
        const char *best = low ? isa_ops[low].mnemonic
                               : np_suggest(word, cands, ISA_OP_COUNT - 1, 2);
        if (best)
            return asm_err(c, t->pos, NP_ERR_UNKNOWN_KEY, "unknown mnemonic '%s'; did you mean "
                           "'%s'?", word, best);
        return asm_err(c, t->pos, NP_ERR_UNKNOWN_KEY, "unknown mnemonic '%s'", word);
    }
    int slot = 0;
    char what[80];
    snprintf(what, sizeof what, "instruction '%s'", word);
    TRY(asm_text_section(c, t->pos, what, &slot));
    asm_core *k = &as->cores[slot];
    if (k->n_insns >= ISA_ASM_MAX_INSNS)
        return asm_err(c, t->pos, NP_ERR_RANGE, "more than %u instructions on core %" PRIu32,
                       ISA_ASM_MAX_INSNS, k->core);
    if (op == ISA_OP_LOOP) {
        if (k->depth == ISA_LOOP_DEPTH)
            return asm_err(c, t->pos, NP_ERR_RANGE, "loops nest deeper than %d", ISA_LOOP_DEPTH);
        k->loop_line[k->depth] = c->line;
        k->loop_col[k->depth++] = (int)t->pos + 1;
    } else if (op == ISA_OP_ENDLOOP) {
        if (k->depth == 0)
            return asm_err(c, t->pos, NP_ERR_SYNTAX, "endloop without a matching loop");
        k->depth--;
    }
    TRY(asm_stmt_add(c, ST_INSN, op, t, c->i, slot, k->n_insns));
    k->n_insns++;
    return NP_OK;
}

static np_status asm_line(asm_cur *c)
{
    asm_tok t;
    char tb[64];
    for (;;) {
        TRY(asm_peek(c, &t));
        if (t.kind == TK_EOL)
            return NP_OK;
        if (t.kind != TK_IDENT)
            return asm_err(c, t.pos, NP_ERR_SYNTAX, "expected a label, directive or instruction, "
                           "got %s", asm_tok_text(c, &t, tb, sizeof tb));
        asm_lex(c, &t);
        asm_tok colon;
        TRY(asm_peek(c, &colon));
        if (asm_is(&colon, ":")) {
            asm_lex(c, &colon);
            TRY(asm_label(c, &t));
            continue;
        }
        if (c->s[t.pos] == '.')
            return asm_directive(c, &t);
        return asm_mnemonic(c, &t);
    }
}

/* ---- Between the passes: addresses, target, checks --------------------------------------------- */

static np_status asm_layout(asm_state *as, const isa_asm_opts *opts)
{
    for (size_t k = 0; k < as->n_cores; k++) {
        asm_core *co = &as->cores[k];
        if (co->depth) {
            asm_cur c = {as, "", 0, 0, co->loop_line[co->depth - 1]};
            return asm_err(&c, (size_t)co->loop_col[co->depth - 1] - 1, NP_ERR_SYNTAX,
                           "loop is not closed by an endloop");
        }
        if (co->kernel_open)
            co->kernels[co->n_kernels - 1].count = co->n_insns - co->kernels[co->n_kernels - 1].start;
    }
    if (!as->have_target) {
        if (!opts || !opts->target)
            return np_err_at(as->err, NP_ERR_MISSING, as->file, 0, 0, "no target architecture: "
                             "give one (npusim asm --arch) or write a .target directive");
        as->target = *opts->target;
    } else if (opts && opts->target && opts->target_strict) {
        char why[256];
        if (!isa_target_equal(&as->target, opts->target, why, sizeof why)) {
            asm_cur c = {as, "", 0, 0, as->target_line};
            return asm_err(&c, (size_t)as->target_col - 1, NP_ERR_INCONSISTENT, ".target differs "
                           "from the architecture asked for: %s", why);
        }
    }
    for (size_t k = 0; k < as->n_cores; k++)
        if (as->cores[k].core >= as->target.cores) {
            asm_cur c = {as, "", 0, 0, as->cores[k].line};
            return asm_err(&c, as->cores[k].col ? (size_t)as->cores[k].col - 1 : 0, NP_ERR_RANGE,
                           "core %" PRIu32 " does not exist: the target has %" PRIu32 " core%s",
                           as->cores[k].core, as->target.cores, as->target.cores == 1 ? "" : "s");
        }
    if (!as->bss_based) {
        uint64_t end = as->have_data ? as->data_base + as->data_size : 0;
        as->bss_base = (end + 4095) & ~(uint64_t)4095;
    }
    if (as->data_base + as->data_size > ISA_HBM_LIMIT ||
        as->bss_base + as->bss_size > ISA_HBM_LIMIT) {
        bool d = as->data_base + as->data_size > ISA_HBM_LIMIT;
        asm_cur c = {as, "", 0, 0, d ? as->data_line : as->bss_line};
        return asm_err(&c, 0, NP_ERR_RANGE, "%s ends above the HBM limit 0x%" PRIx64,
                       d ? ".data" : ".bss", ISA_HBM_LIMIT);
    }
    if (as->have_data && as->have_bss && as->data_size && as->bss_size &&
        as->data_base < as->bss_base + as->bss_size && as->bss_base < as->data_base + as->data_size) {
        asm_cur c = {as, "", 0, 0, as->bss_line ? as->bss_line : as->data_line};
        return asm_err(&c, 0, NP_ERR_INCONSISTENT, ".bss [0x%" PRIx64 ", 0x%" PRIx64 ") overlaps "
                       ".data [0x%" PRIx64 ", 0x%" PRIx64 ")", as->bss_base,
                       as->bss_base + as->bss_size, as->data_base, as->data_base + as->data_size);
    }
    for (size_t k = 0; k < as->n_syms; k++) {
        asm_sym *y = &as->syms[k];
        if (y->kind != SYM_LABEL)
            continue;
        y->val.is_float = false;
        y->val.i = (int64_t)(y->sec == SEC_DATA ? as->data_base + y->off
                             : y->sec == SEC_BSS ? as->bss_base + y->off : y->off);
    }
    for (size_t k = 0; k < as->n_cores; k++) {
        asm_core *co = &as->cores[k];
        co->insns = calloc(co->n_insns ? co->n_insns : 1, sizeof *co->insns);
        if (!co->insns)
            return asm_nomem(as);
    }
    as->data = calloc(as->data_size ? as->data_size : 1, 1);
    if (!as->data)
        return asm_nomem(as);
    return NP_OK;
}

/* ---- Building the program ---------------------------------------------------------------------- */

static int asm_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static np_status asm_name_table(asm_state *as, isa_program *p)
{
    char **sorted = malloc((as->n_names ? as->n_names : 1) * sizeof *sorted);
    if (!sorted)
        return asm_nomem(as);
    for (size_t k = 0; k < as->n_names; k++)
        sorted[k] = as->names[k].str;
    qsort(sorted, as->n_names, sizeof *sorted, asm_cmp_str);
    size_t uniq = 0, len = 1;
    for (size_t k = 0; k < as->n_names; k++)
        if (uniq == 0 || strcmp(sorted[uniq - 1], sorted[k]) != 0) {
            sorted[uniq++] = sorted[k];
            len += strlen(sorted[k]) + 1;
        }
    uint64_t *offs = malloc((uniq ? uniq : 1) * sizeof *offs);
    p->names = malloc(len);
    if (!offs || !p->names) {
        free(sorted);
        free(offs);
        return asm_nomem(as);
    }
    p->names[0] = '\0';
    p->names_len = as->n_names ? len : 0;
    size_t at = 1;
    for (size_t k = 0; k < uniq; k++) {
        offs[k] = at;
        size_t l = strlen(sorted[k]) + 1;
        memcpy(p->names + at, sorted[k], l);
        at += l;
    }
    for (size_t k = 0; k < as->n_names; k++) {
        const asm_nameref *r = &as->names[k];
        char *key = r->str;
        char **hit = bsearch(&key, sorted, uniq, sizeof *sorted, asm_cmp_str);
        as->cores[r->sec].insns[r->insn].opnd[r->field].val = (int64_t)offs[hit - sorted];
    }
    if (!as->n_names) {
        free(p->names);
        p->names = NULL;
    }
    free(sorted);
    free(offs);
    return NP_OK;
}

static int asm_cmp_core(const void *a, const void *b)
{
    uint32_t x = ((const isa_core_text *)a)->core, y = ((const isa_core_text *)b)->core;
    return x < y ? -1 : x > y;
}

static np_status asm_build(asm_state *as, isa_program **out)
{
    isa_program *p = isa_program_new(&as->target);
    if (!p)
        return asm_nomem(as);
    np_status st = asm_name_table(as, p);
    if (st != NP_OK)
        goto fail;
    p->cores = calloc(as->n_cores ? as->n_cores : 1, sizeof *p->cores);
    p->data = calloc(2, sizeof *p->data);
    size_t n_labels = 0;
    for (size_t k = 0; k < as->n_syms; k++)
        n_labels += as->syms[k].kind == SYM_LABEL && as->syms[k].sec < 0;
    p->symbols = calloc(n_labels ? n_labels : 1, sizeof *p->symbols);
    if (!p->cores || !p->data || !p->symbols)
        goto nomem;
    for (size_t k = 0; k < as->n_cores; k++) {
        asm_core *co = &as->cores[k];
        isa_core_text *ct = &p->cores[p->n_cores++];
        ct->core = co->core;
        ct->insns = co->insns;
        ct->n_insns = co->n_insns;
        ct->kernels = co->kernels;
        ct->n_kernels = (uint32_t)co->n_kernels;
        co->insns = NULL;
        co->kernels = NULL;
        co->n_kernels = 0;
    }
    qsort(p->cores, p->n_cores, sizeof *p->cores, asm_cmp_core);
    int sec_index[2] = {-1, -1}; /* .data, .bss -> index in p->data */
    if (as->have_data) {
        isa_data *d = &p->data[p->n_data];
        d->name = strdup(".data");
        d->addr = as->data_base;
        d->size = as->data_size;
        d->bytes = as->data;
        as->data = NULL;
        if (!d->name)
            goto nomem;
        sec_index[0] = (int)p->n_data++;
    }
    if (as->have_bss) {
        isa_data *d = &p->data[p->n_data];
        d->name = strdup(".bss");
        d->addr = as->bss_base;
        d->size = as->bss_size;
        if (!d->name)
            goto nomem;
        sec_index[1] = (int)p->n_data++;
    }
    /* Data symbols: .data labels then .bss labels, each in address order; a label's size runs
     * to the next label of its section (or the section's end) unless .size says otherwise. */
    for (int s = 0; s < 2; s++) {
        int sec = s == 0 ? SEC_DATA : SEC_BSS;
        if (sec_index[s] < 0)
            continue;
        const isa_data *d = &p->data[sec_index[s]];
        for (size_t k = 0; k < as->n_syms; k++) {
            const asm_sym *y = &as->syms[k];
            if (y->kind != SYM_LABEL || y->sec != sec)
                continue;
            uint64_t end = d->size;
            for (size_t j = k + 1; j < as->n_syms; j++)
                if (as->syms[j].kind == SYM_LABEL && as->syms[j].sec == sec) {
                    end = as->syms[j].off;
                    break;
                }
            isa_symbol *sy = &p->symbols[p->n_symbols];
            sy->name = strdup(y->name);
            if (!sy->name)
                goto nomem;
            sy->data = (uint32_t)sec_index[s];
            sy->addr = d->addr + y->off;
            sy->size = y->has_size ? (uint64_t)y->size : end - y->off;
            p->n_symbols++;
        }
    }
    st = isa_program_validate(p, as->err);
    if (st != NP_OK)
        goto fail;
    *out = p;
    return NP_OK;
nomem:
    st = asm_nomem(as);
fail:
    isa_program_free(p);
    return st;
}

static void asm_free(asm_state *as)
{
    for (size_t k = 0; k < as->n_syms; k++)
        free(as->syms[k].name);
    free(as->syms);
    free(as->hash);
    for (size_t k = 0; k < as->n_cores; k++) {
        free(as->cores[k].insns);
        for (size_t j = 0; j < as->cores[k].n_kernels; j++)
            free(as->cores[k].kernels[j].name);
        free(as->cores[k].kernels);
        free(as->cores[k].khash);
    }
    free(as->cores);
    free(as->stmts);
    for (size_t k = 0; k < as->n_names; k++)
        free(as->names[k].str);
    free(as->names);
    free(as->data);
}

np_status isa_asm(const char *src, size_t len, const char *file, const isa_asm_opts *opts,
                  isa_program **out, np_err *err)
{
    asm_state as = {0};
    as.file = file ? file : "<input>";
    as.err = err;
    as.sec = SEC_NONE;
    as.pass = 1;
    *out = NULL;
    np_status st = NP_OK;
    int line = 1;
    for (size_t i = 0; i < len && st == NP_OK; line++) {
        size_t e = i;
        while (e < len && src[e] != '\n')
            e++;
        asm_cur c = {&as, src + i, e - i, 0, line};
        st = asm_line(&c);
        i = e + 1;
    }
    if (st == NP_OK)
        st = asm_layout(&as, opts);
    as.pass = 2;
    for (size_t k = 0; k < as.n_syms && st == NP_OK; k++)
        if (as.syms[k].kind == SYM_EQU) {
            asm_tok ref = {0};
            asm_cur c = {&as, as.syms[k].text, as.syms[k].text_len, as.syms[k].pos,
                         as.syms[k].line};
            ref.pos = as.syms[k].pos;
            st = asm_equ_eval(&c, &ref, &as.syms[k]);
        }
    for (size_t k = 0; k < as.n_stmts && st == NP_OK; k++) {
        const asm_stmt *s = &as.stmts[k];
        st = s->kind == ST_INSN ? asm_insn(&as, s) : s->kind == ST_DATA ? asm_data(&as, s)
                                                                         : asm_size(&as, s);
    }
    if (st == NP_OK)
        st = asm_build(&as, out);
    asm_free(&as);
    return st;
}

np_status isa_asm_file(const char *path, const isa_asm_opts *opts, isa_program **out,
                       np_err *err)
{
    *out = NULL;
    char *text;
    size_t len;
    if (np_read_file(path, ISA_ASM_MAX_FILE_BYTES, "an assembly file", &text, &len, err) != NP_OK)
        return err->status;
    np_status st = isa_asm(text, len, path, opts, out, err);
    free(text);
    return st;
}

/* ---- Disassembler ------------------------------------------------------------------------------ */

/* Bytes [from, to) as .byte lines of 16, a run of 32 or more zeros as one .zero line (a
 * megabyte of zeros is one line, not 65,536). */
static void dis_bytes(isa_buf *b, const uint8_t *bytes, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to;) {
        uint64_t z = i;
        while (z < to && bytes[z] == 0)
            z++;
        if (z - i >= 32) {
            isa_buf_printf(b, "    .zero %" PRIu64 "\n", z - i);
            i = z;
            continue;
        }
        isa_buf_printf(b, "    .byte ");
        for (uint64_t j = i; j < to && j < i + 16; j++)
            isa_buf_printf(b, "%s0x%02x", j == i ? "" : ", ", bytes[j]);
        isa_buf_printf(b, "\n");
        i = i + 16 < to ? i + 16 : to;
    }
}

static void dis_fill(isa_buf *b, const isa_data *d, uint64_t from, uint64_t to)
{
    if (to <= from)
        return;
    if (d->bytes)
        dis_bytes(b, d->bytes, from, to);
    else
        isa_buf_printf(b, "    .space %" PRIu64 "\n", to - from);
}

np_status isa_disasm(const isa_program *p, char **text, np_err *err)
{
    isa_buf b = {0};
    char dt[64];
    isa_buf_printf(&b, "; npusim program, ISA version %u\n", ISA_VERSION);
    isa_buf_printf(&b, ".target rows=%" PRIu32 ", cols=%" PRIu32 ", cores=%" PRIu32 ", spad=0x%"
                   PRIx64 ", acc=0x%" PRIx64 ", dtypes=%s\n", p->target.array_rows,
                   p->target.array_cols, p->target.cores, p->target.spad_bytes,
                   p->target.acc_bytes, isa_dtypes_text(p->target.dtypes, dt, sizeof dt));
    for (uint32_t s = 0; s < p->n_data; s++) {
        const isa_data *d = &p->data[s];
        isa_buf_printf(&b, "\n%s 0x%" PRIx64 "\n", d->bytes ? ".data" : ".bss", d->addr);
        uint64_t at = 0;
        for (uint32_t y = 0; y < p->n_symbols; y++) {
            const isa_symbol *sy = &p->symbols[y];
            if (sy->data != s)
                continue;
            uint64_t off = sy->addr - d->addr;
            dis_fill(&b, d, at, off);
            at = off;
            isa_buf_printf(&b, "%s:\n", sy->name);
            /* The size the assembler would give: up to the next label of the section. */
            uint64_t end = d->size;
            for (uint32_t z = y + 1; z < p->n_symbols; z++)
                if (p->symbols[z].data == s) {
                    end = p->symbols[z].addr - d->addr;
                    break;
                }
            if (sy->size != end - off)
                isa_buf_printf(&b, "    .size %s, %" PRIu64 "\n", sy->name, sy->size);
        }
        dis_fill(&b, d, at, d->size);
    }
    for (uint32_t c = 0; c < p->n_cores; c++) {
        const isa_core_text *ct = &p->cores[c];
        isa_buf_printf(&b, "\n.core %" PRIu32 "\n", ct->core);
        uint32_t k = 0;
        int open = -1; /* kernel whose end is still ahead */
        unsigned depth = 0;
        for (uint32_t i = 0; i <= ct->n_insns; i++) {
            /* A kernel ends implicitly where the next one starts or the section ends; any
             * other end needs .endk. */
            bool implicit_end = (k < ct->n_kernels && ct->kernels[k].start == i) || i == ct->n_insns;
            if (open >= 0 && ct->kernels[open].start + ct->kernels[open].count == i) {
                if (!implicit_end)
                    isa_buf_printf(&b, ".endk\n");
                open = -1;
            }
            while (k < ct->n_kernels && ct->kernels[k].start == i) {
                const isa_kernel *ke = &ct->kernels[k++];
                isa_buf_printf(&b, ".kernel %s\n", ke->name);
                open = (int)(k - 1);
                if (ke->count == 0) {
                    implicit_end = (k < ct->n_kernels && ct->kernels[k].start == i) ||
                                   i == ct->n_insns;
                    if (!implicit_end)
                        isa_buf_printf(&b, ".endk\n");
                    open = -1;
                }
            }
            if (i == ct->n_insns)
                break;
            const isa_insn *in = &ct->insns[i];
            if (in->op == ISA_OP_ENDLOOP && depth)
                depth--;
            char line[1024];
            int len = isa_format(in, p->names, p->names_len, line, sizeof line);
            char *big = NULL;
            if (len >= (int)sizeof line && (big = malloc((size_t)len + 1)) != NULL)
                isa_format(in, p->names, p->names_len, big, (size_t)len + 1);
            int pad = 44 - 4 * (int)(depth + 1) - len;
            isa_buf_printf(&b, "%*s%s%*s ; 0x%05" PRIx64 "\n", 4 * (int)(depth + 1), "",
                           big ? big : line, pad > 0 ? pad : 0, "", (uint64_t)i * ISA_WORD_BYTES);
            free(big);
            if (in->op == ISA_OP_LOOP)
                depth++;
        }
    }
    if (b.oom) {
        free(b.s);
        *text = NULL;
        return np_err_set(err, NP_ERR_NOMEM, "out of memory while disassembling");
    }
    *text = b.s;
    return NP_OK;
}
