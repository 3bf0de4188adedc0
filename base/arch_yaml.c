/* arch_yaml.c — reads an architecture config from YAML with libyaml's event API.
 *
 * The accepted shape is one document holding one mapping:
 *
 *   name: tpu-pod            # optional string
 *   core:   {key: value...}  # each section optional; an empty section is allowed
 *   chip:   {...}
 *   system: {...}
 *
 * Events are consumed in document order and the first problem ends the parse, so the error
 * reported is the first one in the file. Positions come from libyaml's marks (0-based, turned
 * 1-based here) of the key or value at fault; a reader error (bad UTF-8, control characters)
 * only has a byte offset, turned into line:col here. libyaml does not detect duplicate keys, so
 * every key's first position is kept (arch_source) and a second occurrence is an error.
 * Aliases are refused rather than expanded, and no nested value is ever walked, so no input
 * can make the loader recurse or loop. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "arch.h"
#include "readfile.h"
#include "suggest.h"

typedef struct arch_yaml {
    yaml_parser_t parser;
    yaml_event_t ev; /* the current event, valid when have_ev */
    bool have_ev;
    const char *path; /* for messages; "" when the text has no name */
    const char *text;
    size_t len;
    arch_config *cfg;
    np_err *err;
    /* collecting (arch_check_text): errors of keys and values go here and loading goes on
     * with the next key; NULL: the first error stops loading */
    np_err *errs;
    size_t max_errs, n_errs;
} arch_yaml;

static np_status ay_at(arch_yaml *y, np_status s, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static np_status ay_at(arch_yaml *y, np_status s, yaml_mark_t m, const char *fmt, ...)
{
    char msg[NP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return np_err_at(y->err, s, y->path, (int)m.line + 1, (int)m.column + 1, "%s", msg);
}

/* Places error st, filled without a position (by arch_value_parse), at mark m. */
static np_status ay_place(arch_yaml *y, yaml_mark_t m, np_status st)
{
    if (y->err) {
        snprintf(y->err->file, sizeof y->err->file, "%s", y->path);
        y->err->line = (int)m.line + 1;
        y->err->col = (int)m.column + 1;
    }
    return st;
}

/* libyaml's error, at its problem mark (reader errors: at the offending byte). */
static np_status ay_parser_error(arch_yaml *y)
{
    yaml_parser_t *p = &y->parser;
    if (p->error == YAML_MEMORY_ERROR)
        return np_err_set(y->err, NP_ERR_NOMEM, "out of memory parsing %s", y->path);
    if (p->error == YAML_READER_ERROR) {
        yaml_mark_t m = {0, 0, 0};
        for (size_t i = 0; i < p->problem_offset && i < y->len; i++) {
            unsigned char c = (unsigned char)y->text[i];
            if (c == '\n')
                m.line++, m.column = 0;
            else if ((c & 0xC0) != 0x80) /* count characters, as libyaml's marks do */
                m.column++;
        }
        if (p->problem_value >= 0)
            return ay_at(y, NP_ERR_SYNTAX, m, "YAML syntax error: %s (byte 0x%02X)",
                         p->problem ? p->problem : "unreadable input", p->problem_value & 0xFF);
        return ay_at(y, NP_ERR_SYNTAX, m, "YAML syntax error: %s",
                     p->problem ? p->problem : "unreadable input");
    }
    if (p->context)
        return ay_at(y, NP_ERR_SYNTAX, p->problem_mark,
                     "YAML syntax error: %s (%s at line %d, column %d)",
                     p->problem ? p->problem : "malformed input", p->context,
                     (int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
    return ay_at(y, NP_ERR_SYNTAX, p->problem_mark, "YAML syntax error: %s",
                 p->problem ? p->problem : "malformed input");
}

static np_status ay_next(arch_yaml *y)
{
    if (y->have_ev) {
        yaml_event_delete(&y->ev);
        y->have_ev = false;
    }
    if (!yaml_parser_parse(&y->parser, &y->ev))
        return ay_parser_error(y);
    y->have_ev = true;
    return NP_OK;
}

static yaml_mark_t ay_mark(const arch_yaml *y)
{
    return y->ev.start_mark;
}

/* Copies the current scalar to buf (truncated). Returns false if it holds a control
 * character (a NUL or tab from an escape, a newline from a block scalar), which no value may
 * hold; buf then has '?' for each, so that it can still be shown on one line. */
static bool ay_scalar_text(const arch_yaml *y, char *buf, size_t n)
{
    size_t len = y->ev.data.scalar.length, i;
    bool clean = true;
    const unsigned char *v = y->ev.data.scalar.value;
    for (i = 0; i < len && i + 1 < n; i++) {
        bool ctl = v[i] < 0x20 || v[i] == 0x7F;
        clean &= !ctl;
        buf[i] = ctl ? '?' : (char)v[i];
    }
    buf[i] = '\0';
    for (; i < len; i++)
        clean &= !(v[i] < 0x20 || v[i] == 0x7F);
    return clean;
}

/* "a mapping", "a sequence", "an alias", "'text'" — what the current event is, for messages. */
static const char *ay_describe(const arch_yaml *y, char *buf, size_t n)
{
    switch (y->ev.type) {
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_SEQUENCE_START_EVENT: return "a sequence";
    case YAML_ALIAS_EVENT: return "an alias (aliases are not supported in config files)";
    case YAML_SCALAR_EVENT: {
        char text[64];
        ay_scalar_text(y, text, sizeof text);
        snprintf(buf, n, "'%s'", text);
        return buf;
    }
    default: return "something else";
    }
}

static bool ay_is_scalar(const arch_yaml *y)
{
    return y->ev.type == YAML_SCALAR_EVENT;
}

/* The current scalar is quoted (or tagged !!str): a string even if it looks like a number. */
static bool ay_is_quoted(const arch_yaml *y)
{
    const yaml_char_t *tag = y->ev.data.scalar.tag;
    return y->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
           (tag && strcmp((const char *)tag, YAML_STR_TAG) == 0);
}

static bool ay_is_null(const arch_yaml *y)
{
    if (!ay_is_scalar(y) || ay_is_quoted(y))
        return false;
    const char *v = (const char *)y->ev.data.scalar.value;
    return !v[0] || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
           strcmp(v, "NULL") == 0;
}

/* Reads the current event as a key: a scalar name into buf, else a TYPE error. */
static np_status ay_key(arch_yaml *y, const char *where, char *buf, size_t n)
{
    char what[96];
    if (!ay_is_scalar(y))
        return ay_at(y, NP_ERR_TYPE, ay_mark(y), "%s: keys must be names, got %s", where,
                     ay_describe(y, what, sizeof what));
    ay_scalar_text(y, buf, n);
    return NP_OK;
}

/* Consumes the rest of the node whose first event is the current one (a scalar is whole); a
 * node nested more than 64 deep is a TYPE error, not walked. */
static np_status ay_skip_node(arch_yaml *y)
{
    int depth = y->ev.type == YAML_MAPPING_START_EVENT || y->ev.type == YAML_SEQUENCE_START_EVENT;
    while (depth > 0) {
        if (depth > 64)
            return ay_at(y, NP_ERR_TYPE, ay_mark(y), "a value nested more than 64 deep");
        np_status st = ay_next(y);
        if (st != NP_OK)
            return st;
        if (y->ev.type == YAML_MAPPING_START_EVENT || y->ev.type == YAML_SEQUENCE_START_EVENT)
            depth++;
        else if (y->ev.type == YAML_MAPPING_END_EVENT || y->ev.type == YAML_SEQUENCE_END_EVENT)
            depth--;
    }
    return NP_OK;
}

/* A key's or value's error (in *y->err): the status when not collecting; else it is kept and
 * NP_OK returned, so that loading goes on. */
static np_status ay_soft(arch_yaml *y, np_status st)
{
    if (st == NP_ERR_SYNTAX) /* (ay_section_key's nested value: its error is in *y->err) */
        return y->err->status;
    if (!y->errs || st == NP_ERR_NOMEM)
        return st;
    if (y->n_errs < y->max_errs)
        y->errs[y->n_errs] = *y->err;
    y->n_errs++;
    return NP_OK;
}

/* One key of section sec (its name read, km its mark): NP_OK with the value stored, or an
 * error with the value's node consumed whenever it was reached. */
static np_status ay_section_key(arch_yaml *y, const char *sec, const char *name, yaml_mark_t km,
                                bool *consumed)
{
    char what[96];
    np_status st;
    *consumed = false;
    const arch_key_info *k = arch_key_lookup(sec, name);
    if (!k) {
        const arch_key_info *guess = arch_key_suggest(name, sec);
        if (guess)
            return ay_at(y, NP_ERR_UNKNOWN_KEY, km, "unknown key '%s.%s'; did you mean '%s'?",
                         sec, name, guess->full_name);
        return ay_at(y, NP_ERR_UNKNOWN_KEY, km, "unknown key '%s.%s'", sec, name);
    }
    arch_pos *pos = &y->cfg->src.key[k - arch_keys];
    if (pos->origin == ARCH_ORIGIN_FILE)
        return ay_at(y, NP_ERR_DUPLICATE, km,
                     "duplicate key '%s' (first given at line %d, column %d)", k->full_name,
                     pos->line, pos->col);
    if ((st = ay_next(y)) != NP_OK)
        return st;
    *consumed = true;
    if (!ay_is_scalar(y)) { /* not skipped: a nested value stops the file (it may be deep) */
        char expects[256];
        ay_at(y, NP_ERR_TYPE, ay_mark(y), "%s expects %s, got %s", k->full_name,
              arch_key_expects(k, expects, sizeof expects), ay_describe(y, what, sizeof what));
        return NP_ERR_SYNTAX; /* the error stays a TYPE error; SYNTAX only stops collecting */
    }
    char text[256];
    bool clean = ay_scalar_text(y, text, sizeof text);
    arch_value v;
    if (ay_is_null(y)) /* an empty value's mark is where parsing stopped: use the key's */
        return ay_place(y, km, arch_value_parse(k, "", false, &v, y->err));
    if (!clean)
        return ay_at(y, NP_ERR_TYPE, ay_mark(y), "%s: the value holds a control character",
                     k->full_name);
    if ((st = arch_value_parse(k, text, ay_is_quoted(y), &v, y->err)) != NP_OK)
        return ay_place(y, ay_mark(y), st);
    arch_value_store(y->cfg, k, v);
    *pos = (arch_pos){ARCH_ORIGIN_FILE, (int)km.line + 1, (int)km.column + 1};
    return NP_OK;
}

static np_status ay_section(arch_yaml *y, arch_section s)
{
    const char *sec = arch_sections[s].name;
    np_status st;
    for (;;) {
        if ((st = ay_next(y)) != NP_OK)
            return st;
        if (y->ev.type == YAML_MAPPING_END_EVENT)
            return NP_OK;
        char name[128];
        yaml_mark_t km = ay_mark(y);
        if ((st = ay_key(y, sec, name, sizeof name)) != NP_OK)
            return st;
        bool consumed;
        if ((st = ay_section_key(y, sec, name, km, &consumed)) == NP_OK)
            continue;
        if ((st = ay_soft(y, st)) != NP_OK)
            return st;
        if (!consumed && ((st = ay_next(y)) != NP_OK || (st = ay_skip_node(y)) != NP_OK))
            return st; /* the bad key's value */
        if (consumed && (st = ay_skip_node(y)) != NP_OK)
            return st;
    }
}

static np_status ay_name(arch_yaml *y, yaml_mark_t km)
{
    char what[96], text[256];
    arch_pos *pos = &y->cfg->src.name;
    if (pos->origin == ARCH_ORIGIN_FILE)
        return ay_at(y, NP_ERR_DUPLICATE, km,
                     "duplicate key 'name' (first given at line %d, column %d)", pos->line,
                     pos->col);
    np_status st = ay_next(y);
    if (st != NP_OK)
        return st;
    if (!ay_is_scalar(y))
        return ay_at(y, NP_ERR_TYPE, ay_mark(y), "name expects a string, got %s",
                     ay_describe(y, what, sizeof what));
    if (ay_is_null(y))
        return ay_at(y, NP_ERR_MISSING, km, "name has no value (it expects a string)");
    if (!ay_scalar_text(y, text, sizeof text))
        return ay_at(y, NP_ERR_TYPE, ay_mark(y), "name holds a control character");
    if (strlen(text) >= sizeof y->cfg->name)
        return ay_at(y, NP_ERR_RANGE, ay_mark(y), "name is longer than %zu characters",
                     sizeof y->cfg->name - 1);
    snprintf(y->cfg->name, sizeof y->cfg->name, "%s", text);
    *pos = (arch_pos){ARCH_ORIGIN_FILE, (int)km.line + 1, (int)km.column + 1};
    return NP_OK;
}

/* The top-level mapping; the current event is its MAPPING-START. */
static np_status ay_top(arch_yaml *y)
{
    np_status st;
    for (;;) {
        if ((st = ay_next(y)) != NP_OK)
            return st;
        if (y->ev.type == YAML_MAPPING_END_EVENT)
            return NP_OK;
        char name[128], what[96];
        yaml_mark_t km = ay_mark(y);
        if ((st = ay_key(y, "top level", name, sizeof name)) != NP_OK)
            return st;
        if (strcmp(name, "name") == 0) {
            if ((st = ay_name(y, km)) != NP_OK)
                return st;
            continue;
        }
        int s = 0;
        while (s < ARCH_SECTION_COUNT && strcmp(arch_sections[s].name, name) != 0)
            s++;
        if (s == ARCH_SECTION_COUNT) {
            const char *names[ARCH_SECTION_COUNT + 1];
            for (int i = 0; i < ARCH_SECTION_COUNT; i++)
                names[i] = arch_sections[i].name;
            names[ARCH_SECTION_COUNT] = "name";
            const char *guess = np_suggest(name, names, ARCH_SECTION_COUNT + 1, 2);
            const arch_key_info *key = guess ? NULL : arch_key_suggest(name, NULL);
            if (guess)
                st = ay_at(y, NP_ERR_UNKNOWN_KEY, km,
                           "unknown section '%s'; did you mean '%s'?", name, guess);
            else if (key)
                st = ay_at(y, NP_ERR_UNKNOWN_KEY, km,
                           "unknown section '%s'; did you mean '%s' (keys go inside their "
                           "section)?", name, key->full_name);
            else
                st = ay_at(y, NP_ERR_UNKNOWN_KEY, km,
                           "unknown section '%s' (sections: core, chip, system; and name)", name);
            if ((st = ay_soft(y, st)) != NP_OK || (st = ay_next(y)) != NP_OK ||
                (st = ay_skip_node(y)) != NP_OK)
                return st;
            continue;
        }
        arch_pos *pos = &y->cfg->src.section[s];
        if (pos->origin == ARCH_ORIGIN_FILE)
            return ay_at(y, NP_ERR_DUPLICATE, km,
                         "duplicate section '%s' (first given at line %d, column %d)", name,
                         pos->line, pos->col);
        *pos = (arch_pos){ARCH_ORIGIN_FILE, (int)km.line + 1, (int)km.column + 1};
        if ((st = ay_next(y)) != NP_OK)
            return st;
        if (y->ev.type == YAML_MAPPING_START_EVENT) {
            if ((st = ay_section(y, (arch_section)s)) != NP_OK)
                return st;
        } else if (!ay_is_null(y)) {
            return ay_at(y, NP_ERR_TYPE, ay_mark(y),
                         "section '%s' expects a mapping of key: value, got %s", name,
                         ay_describe(y, what, sizeof what));
        }
    }
}

static np_status ay_stream(arch_yaml *y)
{
    static const char shape[] = "a mapping with the sections core:, chip:, system:";
    char what[96];
    np_status st;
    if ((st = ay_next(y)) != NP_OK) /* STREAM-START */
        return st;
    if ((st = ay_next(y)) != NP_OK)
        return st;
    if (y->ev.type == YAML_STREAM_END_EVENT)
        return np_err_at(y->err, NP_ERR_MISSING, y->path, 1, 1, "the file is empty; expected %s",
                         shape);
    if ((st = ay_next(y)) != NP_OK) /* after DOCUMENT-START: the root node */
        return st;
    if (ay_is_null(y))
        return ay_at(y, NP_ERR_MISSING, ay_mark(y), "the document is empty; expected %s", shape);
    if (y->ev.type != YAML_MAPPING_START_EVENT)
        return ay_at(y, NP_ERR_TYPE, ay_mark(y), "the top level must be %s, got %s", shape,
                     ay_describe(y, what, sizeof what));
    if ((st = ay_top(y)) != NP_OK)
        return st;
    if ((st = ay_next(y)) != NP_OK) /* DOCUMENT-END */
        return st;
    if ((st = ay_next(y)) != NP_OK)
        return st;
    if (y->ev.type != YAML_STREAM_END_EVENT)
        return ay_at(y, NP_ERR_SYNTAX, ay_mark(y),
                     "a config file holds one YAML document; a second one starts here");
    return NP_OK;
}

/* "configs/tpu-pod.yaml" -> "tpu-pod" */
static void ay_default_name(const char *path, char *name, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".yaml") == 0)
        len -= 5;
    else if (len > 4 && strcmp(base + len - 4, ".yml") == 0)
        len -= 4;
    if (len == 0)
        return;
    snprintf(name, n, "%.*s", (int)(len < n ? len : n - 1), base);
}

/* arch_load_string, collecting key and value errors into errs[0..max) when errs is set. */
static np_status arch_load_collect(const char *text, size_t len, const char *path,
                                   arch_config *out, np_err *err, np_err *errs, size_t max,
                                   size_t *n)
{
    arch_config cfg;
    arch_defaults(&cfg);
    np_err scratch = {0};
    arch_yaml y = {.path = path ? path : "", .text = text, .len = len, .cfg = &cfg,
                   .err = err ? err : &scratch, .errs = errs, .max_errs = max};
    snprintf(cfg.src.path, sizeof cfg.src.path, "%s", y.path);
    if (path)
        ay_default_name(path, cfg.name, sizeof cfg.name);
    if (!yaml_parser_initialize(&y.parser))
        return np_err_set(err, NP_ERR_NOMEM, "out of memory starting the YAML parser");
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)text, len);
    np_status st = ay_stream(&y);
    if (y.have_ev)
        yaml_event_delete(&y.ev);
    yaml_parser_delete(&y.parser);
    if (n)
        *n = y.n_errs;
    if (st == NP_OK && y.n_errs) /* collected: the first is the load's error */
        st = (*y.err = errs[0]).status;
    if (st == NP_OK)
        *out = cfg;
    return st;
}

np_status arch_load_string(const char *text, size_t len, const char *path, arch_config *out,
                           np_err *err)
{
    return arch_load_collect(text, len, path, out, err, NULL, 0, NULL);
}

np_status arch_check_text(const char *text, size_t len, const char *path, np_err *errs,
                          size_t max, size_t *n)
{
    arch_config cfg;
    np_err e = {0};
    size_t got = 0;
    *n = 0;
    np_status st = arch_load_collect(text, len, path, &cfg, &e, errs, max, &got);
    if (st != NP_OK && !got) { /* a syntax or structure error stopped the file */
        if (max)
            errs[0] = e;
        *n = 1;
        return st;
    }
    if (st != NP_OK) {
        *n = got;
        return st;
    }
    return arch_validate_all(&cfg, errs, max, n);
}

/* Reads a config file whole into *buf (free it), *len bytes: base/readfile.h (no directory
 * or device, at most ARCH_FILE_MAX_BYTES). */
static np_status arch_read_file(const char *path, char **out, size_t *out_len, np_err *err)
{
    return np_read_file(path, ARCH_FILE_MAX_BYTES, "a config file", out, out_len, err);
}

np_status arch_load_file(const char *path, arch_config *out, np_err *err)
{
    char *buf;
    size_t len;
    if (arch_read_file(path, &buf, &len, err) != NP_OK)
        return err->status;
    np_status st = arch_load_string(buf, len, path, out, err);
    free(buf);
    return st;
}

np_status arch_check_file(const char *path, np_err *errs, size_t max, size_t *n)
{
    char *buf;
    size_t len;
    np_err e = {0};
    if (arch_read_file(path, &buf, &len, &e) != NP_OK) {
        if (max)
            errs[0] = e;
        *n = 1;
        return e.status;
    }
    np_status st = arch_check_text(buf, len, path, errs, max, n);
    free(buf);
    return st;
}
