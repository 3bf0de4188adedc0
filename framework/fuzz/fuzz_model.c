/* fuzz_model.c — libFuzzer harness for model files (nn_model_parse). The input is a model
 * file. It must parse or fail with a bad-input error and a message that names the file; a
 * model that parses has every integer in range (at least 1), round-trips (its keys written
 * back as `key = value` lines parse to the same description), and its scale check
 * (nn_model_check_scale, which bounds what the builders compute) answers without overflow
 * at the batch and sequence it would be built with. */
#include <stdio.h>
#include <string.h>

#include "fuzz_harness.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > NN_MODEL_MAX_FILE_BYTES)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* nn_model_load refuses NUL bytes; the parser sees text */
    static nn_model_desc d, d2;
    np_err e = {0};
    np_status st = nn_model_parse("fuzz.model", text, &d, &e);
    free(text);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (strcmp(e.file, "fuzz.model") != 0)
            abort(); /* a model file's error names the file */
        return 0;
    }
    static char back[NN_MODEL_MAX_KEYS * (NN_NAME_MAX + 64)];
    size_t used = 0;
    for (int i = 0; i < d.n; i++) {
        for (int k = 0; k < d.e[i].n; k++)
            if (d.e[i].v[k] < 1)
                abort();
        used += (size_t)snprintf(back + used, sizeof back - used, "%s = %s\n", d.e[i].key,
                                 d.e[i].word);
    }
    if (nn_model_parse("fuzz.model", back, &d2, &e) != NP_OK || d2.n != d.n)
        abort(); /* the description written back parses */
    for (int i = 0; i < d.n; i++)
        if (strcmp(d.e[i].key, d2.e[i].key) || d.e[i].n != d2.e[i].n ||
            memcmp(d.e[i].v, d2.e[i].v, sizeof d.e[i].v))
            abort(); /* ... to the same values */
    bool lm = !strcmp(d.family, "gpt") || !strcmp(d.family, "llama");
    st = nn_model_check_scale(&d, nn_model_int(&d, "batch", 1),
                              lm ? nn_model_int(&d, "context", 1) : 1, &e);
    if (st != NP_OK)
        fuzz_check_failure(st, &e);
    return 0;
}
