/* fuzz_core.c — libFuzzer harness for the core model: the input is assembly for one chip, or
 * for two when it holds the line ";--- chip 1" (what comes after is chip 1's program). What
 * assembles for the tiny preset (with 3 DMA copies in flight and a 2-cycle descriptor
 * decode) runs under a cycle limit, in functional mode when the input's length is odd. The
 * run must end as a success, a deadlock or a simulated fault — never another error, a
 * crash or a hang — and a second run must end exactly the same. Run through scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core.h"
#include "isa_asm.h"

#define FUZZ_CORE_MAX_CYCLES 200000
#define FUZZ_CORE_SPLIT ";--- chip 1"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static arch_config cfg;
    static isa_target target;
    static int ready;
    if (!ready) {
        const char *sets[] = {"core.dma_outstanding=3", "core.dma_setup_cycles=2"};
        np_err e = {0};
        if (arch_resolve("tiny", sets, 2, &cfg, &e) != NP_OK)
            abort();
        isa_target_from_arch(&cfg, &target);
        ready = 1;
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const char *parts[2] = {text, NULL};
    size_t lens[2] = {size, 0};
    char *split = memchr(text, '\0', size) ? NULL : strstr(text, FUZZ_CORE_SPLIT);
    if (split) {
        lens[0] = (size_t)(split - text);
        parts[1] = split;
        lens[1] = size - lens[0];
    }
    uint32_t n = split ? 2 : 1;
    isa_program *p[2] = {NULL, NULL};
    isa_asm_opts o = {.target = &target};
    np_err e = {0};
    for (uint32_t i = 0; i < n; i++)
        if (isa_asm(parts[i], lens[i], "fuzz.s", &o, &p[i], &e) != NP_OK) {
            if (!e.msg[0] || e.status == NP_ERR_INTERNAL)
                abort();
            goto out;
        }
    core_sim_opts opts = {.functional = size & 1, .max_cycles = FUZZ_CORE_MAX_CYCLES};
    core_report *r1 = NULL, *r2 = NULL;
    np_err e1 = {0}, e2 = {0};
    np_status s1 = core_sim_run_chips(&cfg, (const isa_program *const *)p, n, &opts, NULL, &r1, &e1);
    np_status s2 = core_sim_run_chips(&cfg, (const isa_program *const *)p, n, &opts, NULL, &r2, &e2);
    if (s1 != NP_OK && s1 != NP_ERR_DEADLOCK && s1 != NP_ERR_SIM_FAULT && s1 != NP_ERR_RANGE)
        abort(); /* NP_ERR_RANGE: more programs than chips cannot happen here; kept lenient */
    if (s1 != s2 || strcmp(e1.msg, e2.msg) || (s1 != NP_OK && (!e1.msg[0] || r1)))
        abort(); /* not deterministic, or an error without a message */
    if (s1 == NP_OK && (!r1 || !r2 || r1->total_ps != r2->total_ps ||
                        r1->hbm_read_bytes != r2->hbm_read_bytes))
        abort();
    for (uint32_t i = 0; s1 == NP_OK && i < r1->n_units; i++)
        if (r1->units[i].busy_cycles + r1->units[i].stall_cycles > r1->total_cycles)
            abort(); /* a unit busier than the run is long */
    core_report_free(r1);
    core_report_free(r2);
out:
    for (uint32_t i = 0; i < n; i++)
        isa_program_free(p[i]);
    free(text);
    return 0;
}
