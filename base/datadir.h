/* datadir.h — where npusim finds its data: the presets (configs/), the model zoo (models/) and
 * the validation data (validation/).
 *
 * One rule for each kind: the environment variable when it is set and not empty; else, for an
 * installed npusim, <the executable's folder>/../share/npusim/<kind> when that folder exists
 * (`cmake --install`; docs/install.md); else the source tree's folder compiled in by the
 * build (a build that runs from its build folder). */
#ifndef NPUSIM_BASE_DATADIR_H
#define NPUSIM_BASE_DATADIR_H

/* The folder of `kind` ("configs", "models", "validation"): $env, the installed share
 * folder, or built_in, as above. The result is the environment's string, built_in, or a
 * string of this module's that stays valid until the next call for the same kind (at most
 * NP_DATADIR_KINDS kinds). Never NULL. */
#define NP_DATADIR_KINDS 8
const char *np_data_dir(const char *env, const char *kind, const char *built_in);

/* Where the installed data would be: <the executable's folder>/../share/npusim, into
 * buf[n] ("" when the executable's path is not known). */
const char *np_data_share(char *buf, unsigned long n);

#endif
