/* kgen_text.h — the assembly text a kernel generator writes, and its assembly.
 *
 * Generators write assembly (so the ISA table stays the one place instructions are encoded)
 * into a growing buffer, then assemble it for the target architecture:
 *
 *   kgen_text t;
 *   kgen_text_init(&t);
 *   kgen_emit(&t, "    dma.copy spad[0x%llx], hbm[X], bf16, %u\n", a, n);
 *   if (kgen_text_finish(&t, cfg, "kgen_x.s", &text, &prog, err) != NP_OK) return err->status;
 */
#ifndef NPUSIM_KGEN_TEXT_H
#define NPUSIM_KGEN_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "arch.h"
#include "err.h"
#include "isa_prog.h"

typedef struct kgen_text {
    char *s;
    size_t len, cap;
    bool oom; /* an allocation failed: later emits do nothing, finish reports NP_ERR_NOMEM */
} kgen_text;

void kgen_text_init(kgen_text *t);

/* Appends printf-style text. */
void kgen_emit(kgen_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Hands the text over (*text, malloc'd) and, with prog non-NULL, assembles it for cfg (name:
 * the file name in assembler messages). On failure frees the text and sets *text NULL:
 * NP_ERR_NOMEM, or the assembler's error. */
np_status kgen_text_finish(kgen_text *t, const arch_config *cfg, const char *name, char **text,
                           isa_program **prog, np_err *err);

/* Frees the text (after a generator's own error). */
void kgen_text_free(kgen_text *t);

#endif
