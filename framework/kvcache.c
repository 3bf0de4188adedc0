/* kvcache.c — the paged key/value cache of kvcache.h: storage per layer of n_blocks x block
 * rows of width values (keys, then values), a block table per sequence, a free list of
 * blocks (a stack: blocks go back in any order, so a sequence's blocks are not contiguous). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcache.h"
#include "nn.h"

struct nn_kv_cache {
    int64_t layers, width, block, n_blocks, rows;
    float *k, *v;          /* [layers][rows][width] */
    int max_seqs;
    int64_t *len;          /* [max_seqs] tokens cached */
    int64_t *table;        /* [max_seqs][n_blocks] block of each block-sized run of tokens */
    int64_t *free_;        /* the free list (a stack of block ids) */
    int64_t n_free;
};

np_status nn_kv_new(int64_t layers, int64_t width, int64_t block, int64_t n_blocks, int max_seqs,
                    nn_kv_cache **out, np_err *err)
{
    *out = NULL;
    if (layers < 1 || width < 1 || block < 1 || n_blocks < 1 || max_seqs < 1 ||
        block > ((int64_t)1 << 20) || n_blocks > ((int64_t)1 << 20))
        return np_err_set(err, NP_ERR_RANGE, "kv cache: %lld layers, %lld values a token, "
                          "blocks of %lld tokens, %lld blocks, %d sequences (each >= 1)",
                          (long long)layers, (long long)width, (long long)block,
                          (long long)n_blocks, max_seqs);
    nn_kv_cache *c = calloc(1, sizeof *c);
    size_t n = c ? (size_t)(layers * block * n_blocks * width) : 0;
    if (c) {
        c->layers = layers, c->width = width, c->block = block, c->n_blocks = n_blocks;
        c->rows = block * n_blocks, c->max_seqs = max_seqs;
        c->k = calloc(n, sizeof *c->k);
        c->v = calloc(n, sizeof *c->v);
        c->len = calloc((size_t)max_seqs, sizeof *c->len);
        c->table = calloc((size_t)(max_seqs * n_blocks), sizeof *c->table);
        c->free_ = calloc((size_t)n_blocks, sizeof *c->free_);
    }
    if (!c || !c->k || !c->v || !c->len || !c->table || !c->free_) {
        nn_kv_free(c);
        return np_err_set(err, NP_ERR_NOMEM, "out of memory for a kv cache");
    }
    for (int64_t b = 0; b < n_blocks; b++) /* block 0 on top */
        c->free_[b] = n_blocks - 1 - b;
    c->n_free = n_blocks;
    *out = c;
    return NP_OK;
}

void nn_kv_free(nn_kv_cache *c)
{
    if (!c)
        return;
    free(c->k);
    free(c->v);
    free(c->len);
    free(c->table);
    free(c->free_);
    free(c);
}

int64_t nn_kv_len(const nn_kv_cache *c, int seq) { return c->len[seq]; }
int64_t nn_kv_slots(const nn_kv_cache *c) { return c->rows; }
int64_t nn_kv_blocks_used(const nn_kv_cache *c) { return c->n_blocks - c->n_free; }

/* The cache row of token pos of sequence seq (its block must be allocated). */
static int64_t kv_slot(const nn_kv_cache *c, int seq, int64_t pos)
{
    return c->table[seq * c->n_blocks + pos / c->block] * c->block + pos % c->block;
}

/* The name prefix of m's layers ("h" for gpt, "layers" for llama), from its layer 0 k_new. */
static const char *kv_prefix(const nn_model *m)
{
    return nn_graph_find(m->g, "h.0.k_new") ? "h" : "layers";
}

static nn_tensor *kv_node(const nn_model *m, int64_t l, const char *what)
{
    char name[NN_NAME_MAX];
    snprintf(name, sizeof name, "%s.%lld.%s", kv_prefix(m), (long long)l, what);
    return nn_graph_find(m->g, name);
}

np_status nn_kv_load(const nn_kv_cache *c, const nn_model *m, const int *seqs, np_err *err)
{
    int64_t B = m->batch, P = m->kv_slots ? m->kv_slots->ne[1] : 0;
    for (int64_t b = 0; b < B; b++)
        if (seqs[b] < 0 || seqs[b] >= c->max_seqs || c->len[seqs[b]] != P)
            return np_err_set(err, NP_ERR_INCONSISTENT, "kv cache: sequence %d holds %lld "
                              "tokens, the graph reads %lld", seqs[b],
                              (long long)(seqs[b] >= 0 && seqs[b] < c->max_seqs
                                              ? c->len[seqs[b]] : -1),
                              (long long)P);
    if (P == 0)
        return NP_OK;
    size_t per = (size_t)(c->rows * c->width);
    for (int64_t l = 0; l < c->layers; l++) {
        nn_tensor *kc = kv_node(m, l, "k_cache"), *vc = kv_node(m, l, "v_cache");
        if (!kc || !vc || nn_numel(kc) != (int64_t)per)
            return np_err_set(err, NP_ERR_INCONSISTENT, "kv cache: the graph's layer %lld "
                              "has no cache of %lld x %lld", (long long)l, (long long)c->rows,
                              (long long)c->width);
        if (nn_tensor_write(kc, c->k + l * per, per, err) != NP_OK ||
            nn_tensor_write(vc, c->v + l * per, per, err) != NP_OK)
            return err->status;
    }
    float *slots = malloc((size_t)(B * P) * sizeof *slots);
    if (!slots)
        return np_err_set(err, NP_ERR_NOMEM, "out of memory for kv slots");
    for (int64_t b = 0; b < B; b++)
        for (int64_t p = 0; p < P; p++)
            slots[b * P + p] = (float)kv_slot(c, seqs[b], p);
    np_status st = nn_tensor_write(m->kv_slots, slots, (size_t)(B * P), err);
    free(slots);
    return st;
}

np_status nn_kv_store(nn_kv_cache *c, const nn_model *m, const int *seqs, np_err *err)
{
    int64_t B = m->batch, S = m->seq;
    for (int64_t b = 0; b < B; b++) /* blocks first, so a failure stores nothing */
        for (int64_t p = c->len[seqs[b]]; p < c->len[seqs[b]] + S; p++)
            if (p % c->block == 0) {
                if (c->n_free == 0)
                    return np_err_set(err, NP_ERR_RANGE, "kv cache: all %lld blocks of %lld "
                                      "tokens are in use", (long long)c->n_blocks,
                                      (long long)c->block);
                c->table[seqs[b] * c->n_blocks + p / c->block] = c->free_[--c->n_free];
            }
    size_t per = (size_t)(c->rows * c->width);
    for (int64_t l = 0; l < c->layers; l++)
        for (int i = 0; i < 2; i++) {
            const nn_tensor *t = kv_node(m, l, i ? "v_new" : "k_new");
            const float *x = t ? nn_tensor_values(t) : NULL;
            int64_t KV = t ? t->ne[1] : 0, Dh = t ? t->ne[3] : 0;
            if (!x || KV * Dh != c->width || t->ne[2] != S)
                return np_err_set(err, NP_ERR_INCONSISTENT, "kv cache: the graph's layer %lld "
                                  "has no computed k_new/v_new of %lld values a token",
                                  (long long)l, (long long)c->width);
            float *dst = (i ? c->v : c->k) + l * per;
            for (int64_t b = 0; b < B; b++)
                for (int64_t s = 0; s < S; s++) {
                    float *row = dst + kv_slot(c, seqs[b], c->len[seqs[b]] + s) * c->width;
                    for (int64_t h = 0; h < KV; h++)
                        memcpy(row + h * Dh, x + ((b * KV + h) * S + s) * Dh,
                               (size_t)Dh * sizeof *x);
                }
        }
    for (int64_t b = 0; b < B; b++)
        c->len[seqs[b]] += S;
    return NP_OK;
}

uint64_t nn_kv_bytes(int64_t layers, int64_t kv_width, int64_t tokens, int64_t block,
                     int elem_bytes)
{
    int64_t blocks = block > 0 ? (tokens + block - 1) / block : 0;
    return (uint64_t)(blocks * block) * (uint64_t)layers * 2u * (uint64_t)kv_width *
           (uint64_t)elem_bytes;
}
