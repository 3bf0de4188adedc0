/* model.h — model description files (the zoo in models/), the builders that turn one into a
 * graph, and the per-layer summary behind `npusim summary`. The file format is documented in
 * docs/models.md and at the top of model_file.c. */
#ifndef NPUSIM_MODEL_H
#define NPUSIM_MODEL_H

#include "nn.h"

#define NN_MODEL_MAX_KEYS 32
#define NN_MODEL_MAX_VALUES 8
#define NN_MODEL_MAX_FILE_BYTES (64 << 10) /* a model file is a few lines */

typedef struct nn_model_entry {
    char key[32];
    int n;                             /* number of integer values (0 for a word) */
    int64_t v[NN_MODEL_MAX_VALUES];
    char word[NN_NAME_MAX];            /* the value as written */
    double x;                          /* a real key's value (0 for the others) */
    int line, col;                     /* where the key is */
    int vcol;                          /* the column of the value */
} nn_model_entry;

typedef struct nn_model_desc {
    char name[64];   /* file name without .model */
    char path[512];
    char family[32];
    int n;
    nn_model_entry e[NN_MODEL_MAX_KEYS];
} nn_model_desc;

/* Where model files come from: $NPUSIM_MODEL_DIR if set and not empty, else models/. */
const char *nn_model_dir(void);

/* The zoo's model names, sorted (free with nn_model_names_free). */
np_status nn_model_names(char ***names, size_t *n, np_err *err);
void nn_model_names_free(char **names, size_t n);

/* Parses and validates a model file; errors carry file:line:col. */
np_status nn_model_parse(const char *path, const char *text, nn_model_desc *d, np_err *err);
/* A zoo name (models/NAME.model, with did-you-mean when unknown), a path to a model file,
 * a Hugging Face config: a path ending in .json, or a folder holding a config.json
 * (nn_model_load_hf), or an ONNX file: a path ending in .onnx (nn_model_load_onnx). */
np_status nn_model_load(const char *name_or_path, nn_model_desc *d, np_err *err);

/* Validates d's entries as nn_model_parse does after reading the lines (family, keys, values
 * into v[] / x, required keys, consistency): for descriptions made another way (model_hf.c),
 * whose entries carry their key, value text (word) and position. */
np_status nn_model_validate(nn_model_desc *d, np_err *err);

/* The bound of an integer key of family (its values lie in 1 .. bound; a real key's in
 * (0, bound]); 0 when family has no such key. */
int64_t nn_model_key_max(const char *family, const char *key);

/* Models from Hugging Face config.json files (model_hf.c; docs/interop.md): the
 * architectures the transformer builder has (Llama, Mistral, Qwen2, Qwen3, Mixtral,
 * Qwen3-MoE, GPT-2) as a description of family llama or gpt, named after the config's folder.
 * Errors name the file and the key at its line and column; another architecture (or mixture
 * of experts) is refused with the reason. nn_model_load_hf reads path (a config.json, or a folder holding
 * one; at most NN_HF_MAX_FILE_BYTES); nn_model_parse_hf reads text of len bytes. */
#define NN_HF_MAX_FILE_BYTES (1 << 20)
np_status nn_model_parse_hf(const char *path, const char *text, size_t len, nn_model_desc *d,
                            np_err *err);
np_status nn_model_load_hf(const char *path, nn_model_desc *d, np_err *err);

/* Models from ONNX files (model_onnx.c; docs/interop.md): nn_model_load_onnx decodes the
 * file (at most NN_ONNX_MAX_FILE_BYTES) and checks that npusim imports each of its operators,
 * into a description of family "onnx" (named after the file) that nn_model_build builds with
 * nn_onnx_build: the graph node by node into g at the batch asked for (0: the file's),
 * parameters holding the file's values, m->input, m->batch and m->seq set and *logits the
 * first output as [rows, classes]. Errors name the file and the node (number, name,
 * operator). Without ONNX support at build time both refuse every file, saying so. */
#define NN_ONNX_MAX_FILE_BYTES ((uint64_t)2 << 30)
np_status nn_model_load_onnx(const char *path, nn_model_desc *d, np_err *err);
struct nn_model;
np_status nn_onnx_build(nn_graph *g, const nn_model_desc *d, int64_t batch, bool inference,
                        nn_dtype dt, struct nn_model *m, nn_tensor **logits, np_err *err);

/* Values of keys (validated already, so these only fall back to def when absent). */
int64_t nn_model_int(const nn_model_desc *d, const char *key, int64_t def);
double nn_model_real(const nn_model_desc *d, const char *key, double def);
int nn_model_ints(const nn_model_desc *d, const char *key, int64_t *out, int max);
const char *nn_model_word(const nn_model_desc *d, const char *key, const char *def);

/* NP_ERR_RANGE (naming the file) when d at this batch and sequence length would hold more
 * than 2^50 parameters or elements in one tensor, or a training step more than 2^62 FLOPs:
 * counts that 64-bit arithmetic no longer holds. nn_model_build calls it first. */
np_status nn_model_check_scale(const nn_model_desc *d, int64_t batch, int64_t seq, np_err *err);

typedef struct nn_model_opts {
    int64_t batch;        /* 0: the file's batch (default 1) */
    int64_t seq;          /* sequence length for language models; 0: the file's context */
    bool inference;       /* batch norm uses running statistics (buffers) */
    nn_dtype compute;     /* NN_F32, or NN_BF16 for mixed precision (f32 master weights) */
    uint64_t seed;
    double dropout;       /* GPT: dropout probability of the embeddings, the attention
                             probabilities and each block's two residual branches (GPT-2's
                             embd/attn/resid_pdrop); 0 (default) builds no dropout; in
                             [0, 1), and nn_model_build refuses it for another family */
    /* Inference with a kv cache (gpt and llama; docs/serving.md): seq new tokens of each of
     * batch sequences after the past tokens already cached (prefill: past 0; decode: seq 1).
     * The graph has no loss: logits [B, V] of each sequence's last token; per layer l a
     * cache of kv_slots rows [kv_slots, KV x Dh] (compute dtype; constants "<blk>.<l>.k_cache"
     * and "v_cache", blk "h" or "layers") read through m->kv_slots, and the new tokens' keys
     * and values (after rope) as nodes "<blk>.<l>.k_new" and "v_new", [B, KV, seq, Dh]. */
    bool kv;
    int64_t past;         /* tokens already in the cache per sequence (kv only) */
    int64_t kv_slots;     /* rows of each layer's cache (blocks x block size; kv only) */
} nn_model_opts;

typedef struct nn_model {
    nn_graph *g;
    nn_tensor *input;  /* images [B,C,H,W] f32, features [B,F] f32, or tokens [B,S] i32 */
    nn_tensor *labels; /* [B] or [B,S] i32 */
    nn_tensor *logits;
    nn_tensor *loss;   /* mean cross-entropy */
    int64_t batch, seq;
    nn_tensor *kv_slots; /* kv inference with past > 0: [B, past] i32, the cache row of each
                            cached token (a paged cache's block table, nn_kv_cache) */
} nn_model;

/* Builds the forward graph and loss of d (shapes only; no storage). m->g is owned by the
 * caller (nn_graph_free). Layers are named by scope (e.g. "layer1.0.conv1", "h.3.attn"). */
np_status nn_model_build(const nn_model_desc *d, const nn_model_opts *o, nn_model *m,
                         np_err *err);

/* Gives every parameter its initial values (normal with the fan-in scale the builder chose,
 * norms' gamma 1 and biases 0) and every constant buffer (BN running var 1, mean 0). */
np_status nn_model_init(nn_graph *g, uint64_t seed, np_err *err);

typedef struct nn_summary_row {
    char name[NN_NAME_MAX]; /* the scope ("layer1.0.conv1"); a container: its prefix */
    char op[32];
    char type[32];       /* torchinfo's layer type: the PyTorch module class ("Conv2d",
                            "Bottleneck", "Sequential"), or the op for a functional step */
    int depth, index;    /* torchinfo's depth-idx: depth 0 is the model, index counts the rows
                            of a depth from 1 in order */
    bool container;      /* a module made of the rows under it (their params and FLOPs summed
                            into it; mult_adds 0, shown as "--"): nn_summary.modules */
    int ndim;
    int64_t ne[NN_MAX_DIMS]; /* the layer's output */
    int64_t params;
    int64_t mult_adds;   /* torchinfo's Mult-Adds: a convolution's params x batch x output
                            pixels, a linear layer's params x batch x tokens, another
                            layer's params x batch (0 without params) */
    int64_t flops;       /* forward */
    int64_t train_flops; /* forward, backward and optimizer nodes of the layer */
} nn_summary_row;

typedef struct nn_summary {
    char model[64];
    char model_type[32]; /* the model's class ("ResNet"): torchinfo's depth-0 row */
    int64_t batch, seq;
    int ndim;            /* the model's output (logits) */
    int64_t ne[NN_MAX_DIMS];
    nn_summary_row *rows; /* the layers (not containers), in order */
    int n_rows;
    nn_summary_row *modules; /* the containers, in order; module i comes right before row
                                module_before[i] (at the depth it has) */
    int *module_before;
    int n_modules;
    int64_t total_params, trainable_params, non_trainable_params;
    int64_t active_params; /* what one token uses (nn_graph_active_param_count) */
    int64_t total_mult_adds; /* over the layers that are not containers */
    int64_t forward_flops, forward_macs, train_step_flops;
    /* torchinfo's size estimates, in bytes (f32): the input, the outputs of the layers that
     * have parameters twice (forward and backward), the parameters, and their sum */
    uint64_t est_input_bytes, est_fwd_bwd_bytes, est_params_bytes, est_total_bytes;
    /* Memory of one training step (nn_memplan_build): persistent leaves by role, and the
     * transient arena with buffer reuse against no reuse; live peak split by role. */
    uint64_t param_bytes, optimizer_bytes, input_bytes;
    uint64_t arena_bytes, no_reuse_bytes, peak_activation_bytes, peak_gradient_bytes;
    uint64_t peak_bytes; /* arena + every persistent leaf */
} nn_summary;

/* Builds d's training step (forward, backward, AdamW; f32), tallies it per layer and plans
 * its memory. */
np_status nn_summary_build(const nn_model_desc *d, int64_t batch, int64_t seq, nn_summary *s,
                           np_err *err);
void nn_summary_free(nn_summary *s);

/* Sum of the element counts of the trainable parameters of g. */
int64_t nn_graph_param_count(const nn_graph *g);
/* The parameters one token uses: nn_graph_param_count, with each routed expert weight (a
 * parameter moe_gmm reads, [E, ...]) counted k / E of it (k: its layer's experts per token).
 * The input embedding counts in full (Mistral's and Qwen's convention; DeepSeek's cards leave
 * it out). Equal to nn_graph_param_count for a dense model. */
int64_t nn_graph_active_param_count(const nn_graph *g);

#endif
