/* verify.h — whether the expensive invariant checkers run after the work they check.
 *
 * The plan, the lowered programs and the core model each have a verifier (nn_plan_verify,
 * lower_prog_verify, core_sim_verify) that walks a whole structure and reports the first
 * broken invariant as NP_ERR_INTERNAL. They are always callable; np_verify_on() says whether
 * the builders and the simulator call them on their own at the end of every plan build,
 * lowering and simulation: in builds without NDEBUG (Debug), when the environment has
 * NPUSIM_VERIFY=1 (every ctest test sets it: tests/CMakeLists.txt), or after
 * np_verify_enable(true). Off otherwise, so a release run pays nothing.
 */
#ifndef NPUSIM_VERIFY_H
#define NPUSIM_VERIFY_H

#include <stdbool.h>

/* Whether the verifiers run after each build, lowering and simulation (see above). Reads the
 * environment once. */
bool np_verify_on(void);

/* Overrides the build's and the environment's choice for the rest of the process. */
void np_verify_enable(bool on);

#endif
