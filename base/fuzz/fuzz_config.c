/* fuzz_config.c — libFuzzer harness for architecture config files (arch_load_string: libyaml
 * and the config schema). The input is a YAML file. It must load or fail with a bad-input
 * error and a message; a config that loads either validates (arch_validate) or fails it with
 * a bad-input error, and round-trips: the text `npusim config show` prints for it loads again
 * to the same values. */
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "fuzz_harness.h"

/* Every key's value as text, and the name: what two configs must agree on. */
static void fuzz_config_text(const arch_config *c, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "%s\n", c->name);
    for (size_t k = 0; k < ARCH_KEY_COUNT && used < n; k++) {
        char v[128];
        used += (size_t)snprintf(buf + used, n - used, "%s=%s\n", arch_keys[k].full_name,
                                 arch_value_text(c, &arch_keys[k], v, sizeof v));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    arch_config cfg;
    np_err e = {0};
    np_status st = arch_load_string((const char *)data, size, "fuzz.yaml", &cfg, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        return 0;
    }
    np_status vs = arch_validate(&cfg, &e);
    if (vs != NP_OK)
        fuzz_check_failure(vs, &e); /* the consistency rules between keys */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 0;
    arch_print(&cfg, f);
    fclose(f);
    arch_config again;
    if (arch_load_string(text, len, "shown.yaml", &again, &e) != NP_OK)
        abort(); /* what config show prints loads again */
    static char a[1 << 16], b[1 << 16];
    fuzz_config_text(&cfg, a, sizeof a);
    fuzz_config_text(&again, b, sizeof b);
    if (strcmp(a, b) != 0)
        abort(); /* ... to the same values */
    free(text);
    return 0;
}
