/* kernel.h — the kernel ABI: how an operator becomes instructions appended to the programs of
 * a chip's cores.
 *
 * A kernel is described by
 *   - its op (framework/ops.def's nn_op) and named attributes (kc_attr, checked against the
 *     op's declared attributes: unknown names get a did-you-mean, values a range check);
 *   - its operands: inputs and outputs in the op's order (the framework node's sources, then
 *     its result), each a tensor in HBM: address, dtype (framework dtype; kc_isa_dtype maps
 *     it to the ISA's, once), shape and byte strides (kc_tensor);
 *   - an optional fused epilogue: a chain of elementwise ops (bias, residual add, scale,
 *     activations) applied to the result before it is stored (kc_epi);
 *   - its placement: the chip and the cores that run it (kc_place).
 *
 * kc_compile appends the kernel to the program of every placed core (a kernel symbol per
 * core, named after the op unless given) and returns what it expects: FLOPs, HBM bytes and the
 * analytical minimum of HBM bytes (kc_result). Kernels follow one another in one program with
 * no halt between them; kc_prog_finish ends every core's text with halt when the caller is
 * done.
 *
 * Resources. The caller owns the program being built (kc_prog): its HBM buffers (.bss / .data
 * symbols), and per core a scratchpad allocator, an accumulator-SRAM allocator, a semaphore
 * allocator and the scalar registers. A kernel takes what it needs through its kc_ctx while
 * it compiles; at its end everything it took is given back: registers at once, scratchpad,
 * accumulator space and semaphores into quarantine — queues may still be working on them
 * after the kernel's last dispatch — from which they return at the next fence or barrier on
 * that core. When an allocation cannot be met but would be after a fence, the allocator
 * emits the fence itself (so back-to-back kernels overlap until the memory runs out, and
 * never race). Space the caller allocates itself (kc_prog_spad_alloc) stays until the
 * caller frees it: buffers kept across kernels.
 *
 * Ordering. A kernel leaves its semaphores at zero and its DMA queue waits for its own last
 * copies, so on one core a later kernel's copies see an earlier kernel's HBM results. Across
 * cores, kc_compile tracks the HBM ranges every kernel reads and writes since the last
 * barrier and emits a barrier (on every core of the program) before a kernel that touches a
 * range another placement wrote, or writes a range another placement touched
 * (kc_prog_opts.no_auto_barrier turns that off). comm.* queues are not ordered by it: a
 * collective that reads a kernel's output needs kc_fence or kc_barrier first.
 *
 *   kc_prog *p;
 *   kc_prog_new(&cfg, &(kc_prog_opts){.cores = 1}, &p, &err);
 *   uint64_t a, b, c;
 *   kc_prog_bss(p, "A", 64 * 32 * 2, &a, &err); ... b, c
 *   kc_kernel k = {.op = NN_OP_MATMUL, .n_in = 2, .n_out = 1};
 *   kc_tensor_dense(&k.in[0], a, NN_BF16, 2, (int64_t[]){64, 32});
 *   kc_tensor_dense(&k.in[1], b, NN_BF16, 2, (int64_t[]){32, 16});
 *   kc_tensor_dense(&k.out[0], c, NN_BF16, 2, (int64_t[]){64, 16});
 *   kc_result r;
 *   kc_compile(p, &k, &r, &err);               // appended to core 0, kernel "matmul"
 *   kc_prog_finish(p, &err);                   // halt on every core; validated
 *   isa_program *prog = kc_prog_take(p);       // run it (hw-model/core.h), write an ELF, ...
 *   kc_prog_free(p);
 *
 * docs/compiler.md describes the ABI and every kernel's schedule; tests/test_compiler.c
 * compiles this example.
 */
#ifndef NPUSIM_KERNEL_H
#define NPUSIM_KERNEL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "err.h"
#include "isa.h"
#include "isa_emit.h"
#include "isa_prog.h"
#include "nn.h"

#define KC_MAX_DIMS NN_MAX_DIMS
#define KC_MAX_IN NN_MAX_SRC
#define KC_MAX_OUT 4
#define KC_MAX_ATTRS 16
#define KC_MAX_EPI 8

/* ---- dtypes ------------------------------------------------------------------------------- */

/* The ISA element type of a framework dtype (the one table between the two). */
isa_dtype kc_isa_dtype(nn_dtype t);
/* The framework dtype of an ISA element type. */
nn_dtype kc_nn_dtype(isa_dtype t);

/* ---- operands ----------------------------------------------------------------------------- */

/* A tensor in HBM. Element (i0, ..., i_{ndim-1}) is at addr + sum(i_d x stride[d]) bytes.
 * Strides are explicit (kc_tensor_dense fills the row-major ones); in an input, a stride of
 * 0 broadcasts that dimension (every index reads the same elements). A kernel states which
 * layouts it takes (e.g. matmul: each matrix row-major or column-major). */
typedef struct kc_tensor {
    uint64_t addr;
    nn_dtype dtype;
    int ndim;
    int64_t shape[KC_MAX_DIMS];
    int64_t stride[KC_MAX_DIMS]; /* bytes */
} kc_tensor;

/* Fills *t as a dense row-major tensor at addr; returns t. */
kc_tensor *kc_tensor_dense(kc_tensor *t, uint64_t addr, nn_dtype dtype, int ndim,
                           const int64_t *shape);
/* The same with t's shape and dtype taken from a framework tensor. */
kc_tensor *kc_tensor_of(kc_tensor *t, uint64_t addr, const nn_tensor *like);
int64_t kc_tensor_numel(const kc_tensor *t);
/* Bytes of its elements (numel x element size), and the byte range [addr, addr + extent)
 * its elements lie in. */
uint64_t kc_tensor_bytes(const kc_tensor *t);
uint64_t kc_tensor_extent(const kc_tensor *t);

/* ---- attributes --------------------------------------------------------------------------- */

/* A named attribute: INT, BOOL and DTYPE attributes read i, REAL ones f (KC_INT / KC_REAL set
 * both). */
typedef struct kc_attr {
    const char *name;
    int64_t i;
    double f;
} kc_attr;
#define KC_INT(name, v) ((kc_attr){(name), (int64_t)(v), (double)(v)})
#define KC_REAL(name, v) ((kc_attr){(name), (int64_t)(v), (double)(v)})

typedef enum kc_attr_type {
    KC_ATTR_INT,
    KC_ATTR_BOOL,
    KC_ATTR_REAL,
    KC_ATTR_DTYPE, /* an nn_dtype */
    KC_ATTR_SHAPE, /* `npusim kernel --op` keys only: AxBx... */
} kc_attr_type;

/* One attribute (or `--op` key) an op declares. An attribute whose doc starts with "tile:" is a
 * tiling attribute: it chooses among schedules that compute the same values (tuners set
 * them; the tiling cache's keys leave them out). */
typedef struct kc_attr_def {
    const char *name;
    kc_attr_type type;
    double dflt, min, max; /* INT/BOOL/REAL: default and inclusive range; DTYPE: default;
                              KC_REQUIRED: an `--op` key without default, must be given */
    const char *doc;
} kc_attr_def;
#define KC_REQUIRED NAN

/* ---- the epilogue ------------------------------------------------------------------------- */

/* One elementwise step applied to the kernel's result before it is stored, in chain order:
 *   NN_OP_ADD, SUB, MUL, DIV   with arg: result op arg, arg broadcast (numpy rules) to the
 *                              output's shape — a bias [N], a residual [.., M, N], ...
 *   NN_OP_SCALE                result x f
 *   NN_OP_RELU, GELU, SILU, TANH, EXP
 * The kernel computes the chain at the output's dtype (or, for the prefix it fuses into the
 * matrix unit's drain, in fp32) and rounds once per step.
 *
 * The fused chain (KC_DEF_EPILOGUE_ALL kernels: the vector kernels; an additive extension of
 * the steps above) also takes every other elementwise op of ops.def as a step, so that a
 * fusion group of the framework (nn_pass_fuse) is one kernel — its first node the kernel's op,
 * the others its steps (kc_fuse.h builds them):
 *   NN_OP_RELU with f > 0      min(max(result, 0), f) (relu6: f = 6)
 *   NN_OP_LOG
 *   NN_OP_CAST                 the result converted to `to`; the steps after it compute at
 *                              `to` (before the chain's first CAST, at the dtype of the
 *                              kernel op's own result: its inputs' dtype)
 *   NN_OP_DROPOUT              f = p, `seed`: the framework's mask of the result's elements
 *                              (their row-major indices in the output)
 *   NN_OP_CAUSAL_MASK          f = the fill of the elements above the diagonal of the
 *                              output's last two dims
 *   NN_OP_RELU_GRAD (f: the clamp), GELU_GRAD, SILU_GRAD, TANH_GRAD   with arg: the
 *                              framework's (x or y, dy) -> dx with the result as x (or y) and
 *                              arg as dy, or with swap the other way round
 *   swap                       on a step with arg: the result is the op's second operand
 *                              (arg - result, arg / result, ...) */
typedef struct kc_epi {
    nn_op op;
    bool has_arg;
    kc_tensor arg;
    double f;
    bool swap;     /* (KC_DEF_EPILOGUE_ALL) arg op result instead of result op arg */
    nn_dtype to;   /* (KC_DEF_EPILOGUE_ALL) CAST: the dtype it converts to */
    uint64_t seed; /* (KC_DEF_EPILOGUE_ALL) DROPOUT: its seed */
} kc_epi;

/* ---- placement ---------------------------------------------------------------------------- */

/* Cores core0 .. core0 + n_cores - 1 of chip `chip` (n_cores 0 means 1). */
typedef struct kc_place {
    uint32_t chip;
    uint32_t core0, n_cores;
} kc_place;

/* ---- the kernel --------------------------------------------------------------------------- */

typedef struct kc_kernel {
    nn_op op;
    const char *name;       /* the kernel symbol; NULL: the op's name, made unique per core
                               with a ".N" suffix */
    int n_in, n_out;
    kc_tensor in[KC_MAX_IN];   /* in the order of the framework node's sources */
    kc_tensor out[KC_MAX_OUT];
    int n_attrs;
    kc_attr attrs[KC_MAX_ATTRS];
    int n_epi;
    kc_epi epi[KC_MAX_EPI];
    kc_place place;
} kc_kernel;

/* A tiling of a kernel: the attributes that select it (tm, tn, tk, ksplit, ct for the GEMMs)
 * and the cost model's cycles for it. A tuner compiles the kernel with each and keeps the
 * fastest. */
#define KC_MAX_CANDS 16
#define KC_TILING_MAX_ATTRS 6
typedef struct kc_tiling {
    unsigned n_attrs;
    kc_attr attrs[KC_TILING_MAX_ATTRS];
    uint64_t est_cycles;
} kc_tiling;

/* What a compiled kernel is expected to cost. */
typedef struct kc_result {
    char name[64];            /* its kernel symbol (the same on every placed core) */
    uint64_t flops;           /* arithmetic of the op and its epilogue (a multiply-add is 2) */
    uint64_t hbm_read_bytes;  /* bytes the schedule reads from HBM ... */
    uint64_t hbm_write_bytes; /* ... and writes (expected, from the schedule) */
    uint64_t hbm_bytes_min;   /* the analytical minimum: every input read once, every
                                 output written once */
    uint64_t insns;           /* instructions appended, all cores */
    uint32_t cores;           /* cores that got work */
    char schedule[160];       /* the tiling chosen, for people ("tiles 512x512x1024 ...") */
    uint64_t mxu_flops;       /* of flops, those on the matrix unit (0: a vector kernel) */
    uint64_t est_cycles;      /* the cost model's cycles for the tiling chosen (0: none) */
    uint64_t spad_bytes;      /* scratchpad the kernel held at its peak on its fullest core:
                                 its allocations' bytes taken at once (the allocator's) */
    unsigned n_cands;         /* the cost model's best tilings, the chosen one first: the */
    kc_tiling cands[KC_MAX_CANDS]; /* attributes that select each, and its estimate */
} kc_result;

/* ---- the program being built -------------------------------------------------------------- */

typedef struct kc_prog kc_prog;

typedef struct kc_prog_opts {
    uint32_t chip;        /* the chip this program is for (kc_place.chip must match) */
    uint32_t cores;       /* the program runs on cores 0 .. cores-1 (0: chip.cores); every
                             one gets a text, every barrier and the final halt */
    isa_emit_opts emit;   /* HBM layout of .data/.bss (hbm_bytes 0: chip.hbm_bytes) */
    bool no_auto_barrier; /* do not insert barriers for HBM dependencies across cores */
    bool stream_order;    /* a barrier before every kernel but the first, as a GPU stream
                             runs its kernels one after the other (the step lowering, when
                             the chip has a kernel launch overhead: docs/run.md) */
    bool fences_nocomm;   /* every fence and barrier (kc_fence, kc_barrier, the automatic
                             ones) leaves the COMM queue out (`fence nocomm=1`): collectives
                             in flight go on while kernels follow them; a kernel's own
                             messages are waited for through its semaphores */
    const struct kc_tile_cache *tiles; /* (optional) tuned tilings (compiler/kc_tiles.h):
                                          kc_compile uses the one stored for a kernel whose
                                          tiling attributes it does not give */
} kc_prog_opts;

/* An empty program for cfg's chip (cfg must outlive it). NP_ERR_RANGE (more cores than the
 * chip has), NP_ERR_NOMEM. */
np_status kc_prog_new(const arch_config *cfg, const kc_prog_opts *opts, kc_prog **out,
                      np_err *err);
void kc_prog_free(kc_prog *p);

const arch_config *kc_prog_arch(const kc_prog *p);
uint32_t kc_prog_cores(const kc_prog *p);
isa_emit *kc_prog_emit(kc_prog *p);         /* for instructions of the caller's own */
isa_program *kc_prog_program(kc_prog *p);   /* still owned by p */

/* A zeroed HBM buffer of bytes (a .bss symbol called name, or anonymous when name is NULL),
 * 64-byte aligned. Errors as isa_emit_bss. */
np_status kc_prog_bss(kc_prog *p, const char *name, uint64_t bytes, uint64_t *addr,
                      np_err *err);
/* t a dense (row-major) tensor of dtype and shape at a fresh, unnamed BSS buffer of p (at
 * least one byte): what `npusim kernel --op` gives a kernel's operands. Errors as kc_prog_bss. */
np_status kc_tensor_fresh(kc_prog *p, kc_tensor *t, nn_dtype dtype, int ndim,
                          const int64_t *shape, np_err *err);

/* Scratchpad space the caller keeps across kernels on one core: allocated at once (never
 * quarantined), given back with kc_prog_spad_free (into quarantine: queues may still use it).
 * NP_ERR_RANGE when it does not fit. */
np_status kc_prog_spad_alloc(kc_prog *p, uint32_t core, uint64_t bytes, uint64_t align,
                             uint64_t *off, np_err *err);
void kc_prog_spad_free(kc_prog *p, uint32_t core, uint64_t off);

/* A semaphore of core that the caller keeps across kernels (kernels never get it), at zero
 * when taken; kc_prog_sem_free gives it back (into quarantine until the next fence or barrier
 * on the core; it must be at zero again). NP_ERR_RANGE when all are taken. */
np_status kc_prog_sem_alloc(kc_prog *p, uint32_t core, unsigned *sem, np_err *err);
void kc_prog_sem_free(kc_prog *p, uint32_t core, unsigned sem);

/* Appends a fence to core's text (its quarantined resources become free), or a barrier to
 * every core's (all quarantined resources become free; HBM ranges forgotten). */
np_status kc_fence(kc_prog *p, uint32_t core, np_err *err);
np_status kc_barrier(kc_prog *p, np_err *err);

/* Compiles k and appends it to the program of each core of k->place (see the header
 * comment); *res (may be NULL) says what it costs. Errors name the kernel: NP_ERR_UNKNOWN_KEY
 * (op without a kernel, unknown attribute; with a did-you-mean), NP_ERR_RANGE (attribute,
 * operand or placement out of range; a shape that cannot be tiled into the scratchpad names
 * the limit), NP_ERR_INCONSISTENT (operand shapes or dtypes that do not fit the op, a layout
 * the kernel does not take), NP_ERR_NOMEM. On failure the program is left unusable: free
 * it. */
np_status kc_compile(kc_prog *p, const kc_kernel *k, kc_result *res, np_err *err);

/* Ends every core's text with halt and validates the program. */
np_status kc_prog_finish(kc_prog *p, np_err *err);

/* Hands the program over (the caller frees it with isa_program_free); p keeps nothing. */
isa_program *kc_prog_take(kc_prog *p);

/* ---- writing a kernel --------------------------------------------------------------------- */

/* What a kernel's compile function works with. Its allocations are the kernel's: given back
 * at its end (see the header comment). Every kc_* call below records a failure as the
 * emitter's sticky error and returns it, so a kernel may emit a whole schedule and return
 * kc_status(x) once. */
typedef struct kc_ctx {
    kc_prog *prog;
    const arch_config *cfg;
    isa_emit *e;
    const kc_kernel *k;
    kc_result *res;   /* to fill: flops, hbm bytes, cores, schedule */
} kc_ctx;

np_status kc_status(const kc_ctx *x);
/* Records a kernel's own error (shape, layout) prefixed with the kernel's op. */
np_status kc_fail(kc_ctx *x, np_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Selects core (one of the placement's) for the instructions that follow. */
np_status kc_core(kc_ctx *x, uint32_t core);

/* Scratchpad / accumulator bytes (align: a power of two, 0 means 64) and semaphores of the
 * current core. The largest block an allocation can get on core (after a fence, if it would
 * need one) is kc_spad_avail / kc_acc_avail. */
np_status kc_spad_alloc(kc_ctx *x, uint64_t bytes, uint64_t align, uint64_t *off);
np_status kc_acc_alloc(kc_ctx *x, uint64_t bytes, uint64_t align, uint64_t *off);
np_status kc_sem_alloc(kc_ctx *x, unsigned *sem);
uint64_t kc_spad_avail(const kc_ctx *x, uint32_t core);
uint64_t kc_acc_avail(const kc_ctx *x, uint32_t core);

/* A scalar register (r1..r15) of the current core, free again at the kernel's end. */
np_status kc_reg_alloc(kc_ctx *x, unsigned *reg);

/* A loop of count iterations that steps registers reg[i] by step[i] after each one and puts
 * them back when it ends, like the ISA's loop, but with any number of them: the loop
 * instruction steps three, the others are stepped by addi at the end of the body and put
 * back after it. count 1 emits no loop at all (the body runs once, straight; l->real is
 * false: an mxu.mm inside must not rely on mode=first). NP_ERR_RANGE for count 0 or more than
 * KC_LOOP_MAX_REGS registers. */
#define KC_LOOP_MAX_REGS 16
typedef struct kc_loop {
    uint64_t count;
    unsigned n;
    unsigned reg[KC_LOOP_MAX_REGS];
    int64_t step[KC_LOOP_MAX_REGS];
    bool real; /* a loop instruction was emitted */
} kc_loop;
np_status kc_loop_begin(kc_ctx *x, kc_loop *l, uint64_t count, unsigned n, const unsigned *reg,
                        const int64_t *step);
np_status kc_loop_end(kc_ctx *x, kc_loop *l);

/* The value of attribute name: the kernel's, or the default its op declares (the name must
 * be declared). */
int64_t kc_attr_int(const kc_ctx *x, const char *name);
double kc_attr_real(const kc_ctx *x, const char *name);
/* True when the kernel gives attribute name itself. */
bool kc_attr_given(const kc_ctx *x, const char *name);
/* Kernel k's own attribute name (not its op's default); NULL when k does not give it. */
const kc_attr *kc_kernel_attr(const kc_kernel *k, const char *name);

/* ---- the kernel table --------------------------------------------------------------------- */

/* A parsed `npusim kernel --op` value (see kc_spec). */
typedef struct kc_spec_val {
    const char *name;
    kc_attr_type type;
    int64_t i;
    double f;
    int ndim;
    int64_t shape[KC_MAX_DIMS];
    bool given;   /* in the text (else its default) */
} kc_spec_val;

#define KC_MAX_SPEC 24
typedef struct kc_spec {
    nn_op op;
    unsigned n;
    kc_spec_val v[KC_MAX_SPEC]; /* every key the op declares, given or defaulted */
} kc_spec;

/* How close a kernel's output element must be to the reference's: within
 * rtol x |reference| + atol + atol_max x the output's largest finite |reference|. */
typedef struct kc_tol {
    double rtol, atol, atol_max;
} kc_tol;

#define KC_DEF_EPILOGUE 1u     /* takes a fused epilogue */
#define KC_DEF_EPILOGUE_ALL 2u /* takes every step of a fused chain (see kc_epi): implies
                                  KC_DEF_EPILOGUE */

/* One row of the kernel table (compiler/kernels.def): the op, how to compile it, and how
 * `npusim kernel --op "NAME key=value ..."` builds one with fresh operands. */
typedef struct kc_kernel_def {
    nn_op op;
    unsigned flags;              /* KC_DEF_* */
    int n_in, n_out;             /* operand counts (n_in -1: any up to KC_MAX_IN) */
    const kc_attr_def *attrs;    /* the kernel's attributes */
    unsigned n_attrs;
    np_status (*compile)(kc_ctx *x);
    /* (optional) `npusim kernel`: the --op keys beyond the attributes (shapes, dtype) and
     * a builder that allocates the operands in p's HBM and fills *k from them (attributes
     * given as keys are copied by the caller) */
    const kc_attr_def *keys;
    unsigned n_keys;
    np_status (*build)(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err);
    const char *doc;             /* one line: the schedule */
    /* (optional) the framework's computation of k (without its epilogue) on leaves
     * in[0 .. k->n_in) shaped like its inputs: fills out[0 .. k->n_out) with the nodes whose
     * reference values the kernel's outputs must match (`npusim kernel --functional`) */
    np_status (*reference)(nn_graph *g, const kc_kernel *k, nn_tensor *const *in,
                           nn_tensor **out, np_err *err);
    /* (optional) for an input of indices (embedding's, a loss's labels): the bound its values
     * lie below, so that seeded checks draw them from [0, bound); 0 for any other input */
    int64_t (*index_bound)(const kc_kernel *k, int in);
    /* (optional) the inverse of reference: appends to k->attrs the attributes that make k
     * compute framework node t (from t's parameters, ip and fp); k's operands are already
     * t's. NULL: the node sets none (each takes its default). The lowering of whole steps
     * (compiler/lower.h) builds a node's kernel with it and checks the result against
     * reference. */
    np_status (*from_node)(const nn_tensor *t, kc_kernel *k, np_err *err);
    /* (optional) the documented bound of output `out` against reference (docs/compiler.md),
     * for seeded checks (sim/krun.h). NULL: kc_tol_ulp of the output's dtype */
    void (*tolerance)(const kc_kernel *k, int out, kc_tol *t);
    /* (optional) the attribute that changes only the values the kernel computes, never its
     * program's timing (dropout's seed: vpu.rand's immediates), so kernels that differ in it
     * share one timing (sim/run_kernel.h's key leaves it out). NULL: every attribute counts */
    const char *values_only_attr;
} kc_kernel_def;

/* The default bound of kc_kernel_def.tolerance for an output of dtype t: exact for integer
 * outputs, else rtol one ulp of the type (bf16 2^-7, fp16 2^-10, fp32 2^-20: a few fp32
 * roundings), atol_max rtol / 8. */
kc_tol kc_tol_ulp(nn_dtype t);

/* The kernel of op, or NULL when it has none; for ops that need none (views) the reason. */
const kc_kernel_def *kc_kernel_find(nn_op op);
const char *kc_no_kernel_reason(nn_op op);
/* For an op whose kernel is not written yet (KC_NOT_YET in kernels.def) what it will be; NULL
 * otherwise. Such an op is neither a view nor compiled: lowering it fails, naming it. */
const char *kc_kernel_not_yet(nn_op op);

/* True when d declares name as a tiling attribute (its doc starts with "tile:"). */
bool kc_attr_is_tiling(const kc_kernel_def *d, const char *name);

/* ---- `npusim kernel --op "NAME key=value ..."` ---------------------------------------------- */

/* Parses text into *s: the op by its ops.def name, then every key its row declares (its --op
 * keys, then its attributes), given or defaulted. Values: integers, 0/1/true/false, reals,
 * dtypes (bf16, fp16 or f16, fp32 or f32, int8 or i8, int32 or i32), shapes AxBx...
 * NP_ERR_UNKNOWN_KEY: an unknown op or key (with a did-you-mean) or an op without a kernel;
 * NP_ERR_MISSING: a required key not given; NP_ERR_DUPLICATE: a key given twice;
 * NP_ERR_SYNTAX / NP_ERR_RANGE: a value (the message names the key). */
np_status kc_spec_parse(const char *text, kc_spec *s, np_err *err);

/* The value of key name, or NULL when the op declares no such key. */
const kc_spec_val *kc_spec_get(const kc_spec *s, const char *name);

/* The kernel of a parsed spec: the row's build (operands in fresh .bss buffers of p) with
 * the attributes the text gives copied into it (the others keep the kernel's defaults). NP_ERR_UNKNOWN_KEY when the row has no
 * builder, the builder's errors. */
np_status kc_spec_kernel(kc_prog *p, const kc_spec *s, kc_kernel *k, np_err *err);

#endif
