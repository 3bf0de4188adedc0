/* fuzz_set.c — libFuzzer harness for `--set SECTION.KEY=VALUE` (arch_set). The input is one
 * assignment (bytes up to the first NUL). Applied to the defaults it must succeed or fail
 * with a bad-input error and a message, leaving the config as it was; a value that is
 * accepted leaves a valid-by-key config whose value, written back as text and set again,
 * gives the same value. */
#include <string.h>

#include "arch.h"
#include "fuzz_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[512];
    if (size >= sizeof in)
        size = sizeof in - 1;
    memcpy(in, data, size);
    in[size] = '\0';
    arch_config cfg, before;
    arch_defaults(&cfg);
    before = cfg;
    np_err e = {0};
    np_status st = arch_set(&cfg, in, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (memcmp(&cfg, &before, sizeof cfg) != 0)
            abort(); /* nothing changed on failure */
        return 0;
    }
    const char *eq = strchr(in, '=');
    if (!eq)
        abort(); /* an assignment without '=' cannot be accepted */
    char key[128];
    size_t kl = (size_t)(eq - in);
    while (kl && (in[kl - 1] == ' ' || in[kl - 1] == '\t'))
        kl--;
    size_t ks = 0;
    while (ks < kl && (in[ks] == ' ' || in[ks] == '\t'))
        ks++;
    if (kl - ks >= sizeof key)
        return 0;
    memcpy(key, in + ks, kl - ks);
    key[kl - ks] = '\0';
    const arch_key_info *k = arch_key_find(key);
    if (!k)
        return 0; /* "name" */
    char v[128], again[256], v2[128];
    arch_value_text(&cfg, k, v, sizeof v);
    snprintf(again, sizeof again, "%s=%s", key, v);
    arch_config cfg2;
    arch_defaults(&cfg2);
    if (arch_set(&cfg2, again, &e) != NP_OK)
        abort(); /* the value as written back is accepted */
    if (strcmp(arch_value_text(&cfg2, k, v2, sizeof v2), v) != 0)
        abort(); /* ... and is the same value */
    return 0;
}
