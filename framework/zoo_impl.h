/* zoo_impl.h — what the zoo's builders share (zoo.c: the CNNs, MLP, nn_model_build; zoo_llm.c:
 * the transformers): the builder's state and the helpers that make parameters and layers.
 * Not part of the public API (model.h). */
#ifndef NPUSIM_ZOO_IMPL_H
#define NPUSIM_ZOO_IMPL_H

#include "model.h"

/* a parameter's initialization, in its fp[1] (nn_model_init) */
#define NN_INIT_NORMAL 0
#define NN_INIT_ONES 1
#define NN_INIT_ZEROS 2

#define NN_ZB_MAX_MTP 4

typedef struct nn_zb {
    nn_graph *g;
    bool inference;
    nn_dtype dt;
    double dropout;
    nn_tensor *aux;  /* the sum of the MoE layers' auxiliary losses (NULL: none) */
    int n_aux;       /* how many layers added to it */
    int n_mtp;       /* DeepSeek-V3's multi-token prediction depth (0: none) */
    nn_tensor *mtp[NN_ZB_MAX_MTP]; /* each depth's logits [B (S-k), V] */
    /* inference with a kv cache (nn_model_opts.kv; docs/serving.md) */
    bool kv;
    int64_t past, kv_slots;
    nn_model *m;     /* the model being built (its kv_slots input) */
} nn_zb;

#define DIMS(...) (int64_t[]){__VA_ARGS__}
#define NDIMS(...) ((int)(sizeof DIMS(__VA_ARGS__) / sizeof(int64_t)))
#define PARAM(b, name, std, init, ...)                                                    \
    zb_param(b, name, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__), std, init)

/* Dropout of p = b->dropout (none when 0). */
nn_tensor *zb_dropout(nn_zb *b, nn_tensor *x);
/* A trainable f32 parameter (master weight) with its initialization; returns the value the
 * model computes with (cast to b->dt). Inference with a kv cache keeps weights in the compute
 * dtype itself, as a server does: no cast. */
nn_tensor *zb_param(nn_zb *b, const char *name, int ndim, const int64_t *ne, double std,
                    int init);
/* A constant f32 buffer [n] (not trained), cast to b->dt. */
nn_tensor *zb_buffer(nn_zb *b, const char *name, int64_t n, int init);
/* x W (+ b) with W [in, out] named <scope>.weight. */
nn_tensor *zb_linear(nn_zb *b, nn_tensor *x, int64_t in, int64_t out, bool bias,
                     const char *scope);
/* The logits [B S, V] of the transformer families (gpt, llama) over tokens [B, S] (m->input). */
nn_tensor *zb_transformer(nn_zb *b, const nn_model_desc *d, int64_t B, int64_t S, nn_model *m);

#endif
