/* report_impl.h — what the report's files share (not an interface: report.h is): the page's
 * geometry, its escape for element text and attributes, numbers for people, and the
 * building blocks of a section (report.c defines them; report_compare.c uses them too). */
#ifndef NPUSIM_REPORT_IMPL_H
#define NPUSIM_REPORT_IMPL_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"

#define W 960       /* chart width, px */
#define LABEL_W 170 /* left label column */

/* s as element text or a double-quoted attribute value: & < > " ' as character references
 * (NULL: nothing). Every string from an input reaches the page through it (or report.c's
 * escape for JSON in a script). */
void rp_esc(FILE *f, const char *s);
/* Seconds, bytes and SI-scaled values for people, into buf; returns buf. */
const char *rp_fmt_s(double s, char *buf, size_t n);
const char *rp_fmt_bytes(double b, char *buf, size_t n);
const char *rp_fmt_si(double v, const char *unit, char *buf, size_t n);
/* o's number at key k, or NaN (o NULL, no such key, not a number). */
double rp_num(const json_t *o, const char *k);
/* <section id> with its <h2>, an <svg> chart W px wide and h high, a headline card. */
void rp_section(FILE *f, const char *id, const char *title);
void rp_svg_open(FILE *f, const char *id, int h, const char *label);
void rp_card(FILE *f, const char *label, const char *value);
/* The timeline section of in's trace (section `id`, chart `chart-<id>`), on a time axis of
 * span_ps at least (0: the trace's own span), so two runs' timelines share a scale. */
void rp_timeline(FILE *f, const report_input *in, const char *id, const char *title,
                 uint64_t span_ps);

/* report_compare.c: the two runs side by side (in->cmp), written before the first run's
 * sections. */
void rp_compare(FILE *f, const report_input *in);

#endif
