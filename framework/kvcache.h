/* kvcache.h — a paged key/value cache for the reference executor's inference graphs
 * (nn_model_opts.kv; docs/serving.md): every layer's keys and values in fixed-size blocks of
 * `block` tokens (rows of KV x Dh values), a sequence's tokens in the blocks of its block
 * table, handed out from a free list as it grows (vLLM's PagedAttention layout). The graphs
 * read it through a slot per cached token (block x block size + offset): nn_kv_load fills the
 * graph's cache constants and its kv_slots input, nn_kv_store appends the new tokens' keys
 * and values the graph computed.
 *
 *   nn_kv_cache *c;  nn_kv_new(layers, KV * Dh, 16, 64, 4, &c, &err);
 *   (build seq tokens of sequences {0, 1} with opts.kv, .past = nn_kv_len(c, 0), .kv_slots =
 *    nn_kv_slots(c)) -> nn_kv_load(c, &m, seqs, &err); nn_graph_compute; nn_kv_store(...)
 */
#ifndef NPUSIM_FRAMEWORK_KVCACHE_H
#define NPUSIM_FRAMEWORK_KVCACHE_H

#include "model.h"

typedef struct nn_kv_cache nn_kv_cache;

/* A cache of n_blocks blocks of `block` tokens for `layers` layers of `width` values a token
 * (KV heads x head dim) and up to max_seqs sequences. NP_ERR_RANGE on a size < 1,
 * NP_ERR_NOMEM. Owned by the caller (nn_kv_free). */
np_status nn_kv_new(int64_t layers, int64_t width, int64_t block, int64_t n_blocks, int max_seqs,
                    nn_kv_cache **out, np_err *err);
void nn_kv_free(nn_kv_cache *c);

/* Tokens cached for sequence seq (0 .. max_seqs-1), and the cache's rows (blocks x block). */
int64_t nn_kv_len(const nn_kv_cache *c, int seq);
int64_t nn_kv_slots(const nn_kv_cache *c);
/* Blocks in use. */
int64_t nn_kv_blocks_used(const nn_kv_cache *c);

/* Before computing m (built with kv for sequences seqs[0 .. m->batch-1], every one holding
 * m's past tokens): writes each layer's cache constants and m->kv_slots. NP_ERR_INCONSISTENT
 * when a sequence's length is not m's past or m's cache does not have this cache's shape. */
np_status nn_kv_load(const nn_kv_cache *c, const nn_model *m, const int *seqs, np_err *err);

/* After computing m: appends each sequence's m->seq new tokens (every layer's k_new, v_new),
 * taking blocks from the free list as they fill. NP_ERR_RANGE when no block is free. */
np_status nn_kv_store(nn_kv_cache *c, const nn_model *m, const int *seqs, np_err *err);

/* Bytes of a cache holding `tokens` tokens in blocks of `block` (whole blocks), for a model
 * of `layers` layers and kv_width values a token (keys and values), elem_bytes each. */
uint64_t nn_kv_bytes(int64_t layers, int64_t kv_width, int64_t tokens, int64_t block,
                     int elem_bytes);

#endif
