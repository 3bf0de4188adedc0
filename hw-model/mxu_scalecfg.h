/* mxu_scalecfg.h — SCALE-Sim `.cfg` architecture files, turned into npusim config overrides.
 *
 * A SCALE-Sim config is an INI file ([general], [architecture_presets], [run_presets], ...)
 * of `Key : value` or `key = value` lines; '#' and ';' start comments. Keys are matched
 * without regard to case, as Python's configparser does, and a key given twice in one section
 * is an error (configparser's DuplicateOptionError). The keys that describe the array and its
 * memories map onto npusim's architecture keys:
 *
 *   ArrayHeight, ArrayWidth                    core.array_rows, core.array_cols
 *   Dataflow (os | ws | is)                    core.dataflow
 *   IfmapSramSzkB + FilterSramSzkB + OfmapSramSzkB   core.sram_bytes (KiB; one scratchpad)
 *   Bandwidth (words/cycle; 1-byte words) with InterfaceBandwidth: USER
 *                                              chip.hbm_gb_per_s = Bandwidth x clock_ghz
 *   run_name                                   the folder the reports go to (npusim layer)
 *
 * With InterfaceBandwidth: CALC SCALE-Sim sizes the memory interface so that the array never
 * stalls: `calc_bandwidth` is set and the reports give SCALE-Sim's figures with 0 stall
 * cycles (npusim layer). Every other key (offsets, banks, sparsity, ...) is ignored. Values
 * are checked where they are read, against the ranges of the npusim keys they become, with
 * file:line:col.
 */
#ifndef NPUSIM_MXU_SCALECFG_H
#define NPUSIM_MXU_SCALECFG_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define MXU_SCALECFG_MAX_SETS 5
#define MXU_SCALECFG_MAX_FILE_BYTES (64 << 10)
#define MXU_SCALECFG_RUN_NAME_MAX 128

typedef struct mxu_scalecfg {
    char sets[MXU_SCALECFG_MAX_SETS][96]; /* "core.array_rows=32", ... for arch_resolve */
    size_t n_sets;
    double bandwidth_words; /* Bandwidth, 0 when absent or not USER */
    bool calc_bandwidth;    /* InterfaceBandwidth: CALC (SCALE-Sim's default when absent) */
    char run_name[MXU_SCALECFG_RUN_NAME_MAX + 1]; /* "" when absent */
} mxu_scalecfg;

/* Parses text[0..len) (path names it in errors). The bandwidth override needs the core clock:
 * it is written with clock_ghz. NP_ERR_SYNTAX (file:line:col) for a line that is neither a
 * section, a comment nor `key: value`, or a malformed value; NP_ERR_RANGE for a value outside
 * its key's range, NP_ERR_UNKNOWN_KEY for an unknown dataflow or bandwidth mode,
 * NP_ERR_DUPLICATE for a key given twice in a section, NP_ERR_MISSING when ArrayHeight,
 * ArrayWidth or Dataflow is absent. *out is unchanged on failure. */
np_status mxu_scalecfg_parse(const char *text, size_t len, const char *path, double clock_ghz,
                             mxu_scalecfg *out, np_err *err);

/* mxu_scalecfg_parse on the file at path (at most 64 KiB); NP_ERR_IO if it cannot be read or
 * is not a file, NP_ERR_RANGE if it is larger. */
np_status mxu_scalecfg_load(const char *path, double clock_ghz, mxu_scalecfg *out, np_err *err);

#endif
