/* validate_md.h — `npusim validate`'s figures for people, and the Markdown of the generated
 * part of docs/validation.md (`npusim validate --markdown`; tests/test_validate.c checks the
 * document against it). Every function is deterministic: the same results print the same
 * bytes. */
#ifndef NPUSIM_SIM_VALIDATE_MD_H
#define NPUSIM_SIM_VALIDATE_MD_H

#include <stdio.h>

#include "validate.h"

/* v with the digits that matter: 12,345 (thousands separated), 123.4, 12.34, 1.234, 0.123. */
const char *val_num(double v, char *buf, size_t n);

/* A figure's value with its unit: "137.0 TFLOP/s", "190.0 µs", "231.4 GB/s". */
const char *val_value(const char *figure, double v, char *buf, size_t n);

/* A signed error: "+12.3 %", "-28.6 %". */
const char *val_err_text(double pct, char *buf, size_t n);

/* A suite's (or file's) statistics in one sentence: "10 of 10 rows ran; mean |error| 28.6 %,
 * median ..., worst -34.0 % (ID); ..." (worst_id: the worst row's id). */
const char *val_stats_text(const val_stats *s, const char *worst_id, char *buf, size_t n);

/* The heading, description and table head of a suite's table. */
void val_md_suite_head(FILE *out, const val_suite *s);

/* One row of a suite's table: | id | configuration | published | ours | error |. res NULL:
 * the row not run (the last two cells empty); a row that cannot run says why in "ours". */
void val_md_row(FILE *out, const val_file *f, const val_row *r, const val_result *res);

/* A file's provenance as a list item with its keys (title, source, commit, where, machine,
 * config, command, notes, every assumed line). */
void val_md_sources(FILE *out, const val_file *f);

#endif
