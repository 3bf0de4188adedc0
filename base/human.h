/* human.h — figures for people: thousands separators and units scaled for reading (KiB, MiB,
 * GiB; ps, ns, µs, ms, s; k, M, G, T, P). Exact values belong in --json; these are for text.
 *
 * Each function writes a NUL-terminated string into buf (n bytes; 32 is always enough) and
 * returns buf. Rounding is to three significant digits at most, never shown as a larger unit
 * than the value reaches ("999 B", "1.00 KiB").
 */
#ifndef NPUSIM_HUMAN_H
#define NPUSIM_HUMAN_H

#include <stddef.h>
#include <stdint.h>

#define NP_HUMAN_MAX 32

/* "50,553"; negative values with a leading '-' (np_human_int). */
char *np_human_count(uint64_t v, char *buf, size_t n);
char *np_human_int(int64_t v, char *buf, size_t n);

/* "8 B", "8.00 KiB", "666 GiB", "1.50 TiB" (binary units). */
char *np_human_bytes(uint64_t bytes, char *buf, size_t n);

/* A time given in picoseconds: "750 ps", "50.6 µs", "1.25 s"; past 1000 s, "12,345 s". */
char *np_human_ps(uint64_t ps, char *buf, size_t n);

/* A duration in seconds that may be long: as np_human_ps below 1000 s, then "16.7 min",
 * "5.79 h", "2.08 days", "1,157 days" (0, negative or NaN: "0 s"). */
char *np_human_s(double s, char *buf, size_t n);

/* v scaled by powers of 1000 with an SI prefix before unit: (4.09e9, "FLOP") -> "4.09 GFLOP",
 * (735135.9e9, "FLOP") -> "735 TFLOP", (12, "MAC") -> "12 MAC". */
char *np_human_si(double v, const char *unit, char *buf, size_t n);

/* Joules scaled for reading, small ones too: "1.23 J", "45.6 mJ", "7.89 µJ", "12 pJ". */
char *np_human_j(double j, char *buf, size_t n);

/* The printf field width that makes the UTF-8 text s take width columns on a terminal: width
 * plus the bytes of s that are not characters of their own ("µs" is 3 bytes, 2 columns), as
 * in printf("%*s", np_human_width(s, 12), s). */
int np_human_width(const char *s, int width);

#endif
