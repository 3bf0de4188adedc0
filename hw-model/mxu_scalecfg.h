/* mxu_scalecfg.h — SCALE-Sim `.cfg` architecture files, turned into npusim config overrides.
 *
 * A SCALE-Sim config is an INI file ([general], [architecture_presets], [run_presets], ...)
 * of `Key : value` or `key = value` lines; '#' and ';' start comments. The keys that describe
 * the array and its memories map onto npusim's architecture keys:
 *
 *   ArrayHeight, ArrayWidth                    core.array_rows, core.array_cols
 *   Dataflow (os | ws | is)                    core.dataflow
 *   IfmapSramSzkB + FilterSramSzkB + OfmapSramSzkB   core.sram_bytes (KiB; one scratchpad)
 *   Bandwidth (words/cycle; 1-byte words) with InterfaceBandwidth: USER
 *                                              chip.hbm_gb_per_s = Bandwidth x clock_ghz
 *
 * Every other key (offsets, banks, sparsity, run_name, ...) is ignored. With
 * InterfaceBandwidth: CALC (SCALE-Sim estimates the bandwidth) the architecture's HBM is kept.
 */
#ifndef NPUSIM_MXU_SCALECFG_H
#define NPUSIM_MXU_SCALECFG_H

#include <stddef.h>

#include "err.h"

#define MXU_SCALECFG_MAX_SETS 5

typedef struct mxu_scalecfg {
    char sets[MXU_SCALECFG_MAX_SETS][96]; /* "core.array_rows=32", ... for arch_resolve */
    size_t n_sets;
    double bandwidth_words; /* Bandwidth, 0 when absent or not USER */
} mxu_scalecfg;

/* Parses text[0..len) (path names it in errors). The bandwidth override needs the core clock:
 * it is written with clock_ghz. NP_ERR_SYNTAX (file:line:col) for a line that is neither a
 * section, a comment nor `key: value`, or a mapped key with a bad value; NP_ERR_MISSING when
 * ArrayHeight, ArrayWidth or Dataflow is absent. *out is unchanged on failure. */
np_status mxu_scalecfg_parse(const char *text, size_t len, const char *path, double clock_ghz,
                             mxu_scalecfg *out, np_err *err);

/* mxu_scalecfg_parse on the file at path; NP_ERR_IO if it cannot be read. */
np_status mxu_scalecfg_load(const char *path, double clock_ghz, mxu_scalecfg *out, np_err *err);

#endif
