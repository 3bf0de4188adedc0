/* fuzz_model_hf.c — libFuzzer harness for Hugging Face config.json files (nn_model_parse_hf).
 * The input is a config. It must parse or fail with a bad-input error and a message that names
 * the file; a config that parses is a description of family llama or gpt that validates again
 * as it is (every integer at least 1), and whose scale check answers without overflow at
 * batch 1 and its context. */
#include <stdio.h>
#include <string.h>

#include "fuzz_harness.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > NN_HF_MAX_FILE_BYTES)
        return 0;
    static nn_model_desc d, d2;
    np_err e = {0};
    np_status st = nn_model_parse_hf("fuzz/config.json", (const char *)data, size, &d, &e);
    if (st != NP_OK) {
        fuzz_check_failure(st, &e);
        if (strcmp(e.file, "fuzz/config.json") != 0)
            abort(); /* a config's error names the file */
        return 0;
    }
    if (strcmp(d.family, "llama") != 0 && strcmp(d.family, "gpt") != 0)
        abort();
    for (int i = 0; i < d.n; i++)
        for (int k = 0; k < d.e[i].n; k++)
            if (d.e[i].v[k] < 1)
                abort();
    d2 = d;
    if (nn_model_validate(&d2, &e) != NP_OK)
        abort(); /* what the importer made is a valid description */
    st = nn_model_check_scale(&d, 1, nn_model_int(&d, "context", 1), &e);
    if (st != NP_OK)
        fuzz_check_failure(st, &e);
    return 0;
}
