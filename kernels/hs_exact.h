/* Exact (brute-force) top-k vector search over a contiguous float32 block. */
#ifndef HS_EXACT_H
#define HS_EXACT_H

#include "hs_common.h"

/* Top-k of nq queries against rows [0, n) of X (n x d, row-major).
 *
 * xaux holds one float per row: 1/||x|| for HS_METRIC_COSINE (0 for a zero
 * row), ||x||^2 for HS_METRIC_L2; it is ignored for HS_METRIC_IP.
 * bits (NULL = every row) restricts the search to rows whose bit is set: a
 * pre-filter, so every returned row matches it.
 * Outputs are nq x k, best first: scores (cosine similarity, inner product,
 * or -euclidean distance) and row ids, padded with -inf / -1.
 * Ties in score go to the lower row id. */
int hs_exact_search(const float *X, int64_t n, int64_t d, const float *xaux,
                    const float *Q, int64_t nq, int metric, const uint64_t *bits,
                    int64_t k, float *out_scores, int64_t *out_ids);

#endif
