/* Exact MaxSim (late interaction, ColBERT-style) over ragged per-document token blocks.
 *
 * score(Q, D) = sum over query rows q of max over document rows x of sim(q, x), with
 * sim = q.x (ip), q.x / (|q||x|) (cosine) or -|q - x| (l2).
 *
 * The token rows of every document live in one row-major block; a document owns a
 * contiguous run of rows. The inner loop is hs_score_tile() of hs_distance.h with the
 * roles turned round: 8 document rows are its "queries" (read in place, row-major) and
 * the query rows, transposed once per call, its 32 "rows"; so one tile is an 8 x 32 block
 * of dot products, the query (d x 32 floats, 16 KB at d = 128) stays in L1 across the
 * whole scan, and every document row is read once whatever the number of query rows.
 */
#ifndef HS_MAXSIM_H
#define HS_MAXSIM_H

#include "hs_common.h"

/* Longest token block of one document (API.md section 10). */
#define HS_MAXSIM_MAX_ROWS 4096

/* A token store as the kernel reads it (every array owned by the caller). */
typedef struct {
    const float *rows;      /* n_rows x d, row-major */
    const float *inv_norm;  /* n_rows: 1 / |x| (cosine) */
    const float *sq_norm;   /* n_rows: |x|^2 (l2) */
    const int64_t *row_slot;/* n_rows: the slot owning the row, -1 for a dead row; a slot's
                               rows are one contiguous run */
    const int64_t *slot_off;/* n_slots: first row of the slot */
    const int32_t *slot_cnt;/* n_slots: its number of rows, 0 when the slot holds nothing */
    int64_t n_rows, n_slots, d;
} hs_mv_store;

/* Exact MaxSim top-k of query Q (m x d, row-major, m >= 1) over every live slot (only
 * those whose bit is set when bits != NULL; nwords uint64 words). Writes k (score, slot)
 * pairs best first, ties to the lower slot, padded with (-inf, -1); *kept = pairs found.
 * HS_EINVAL on bad arguments or an inconsistent store. */
int hs_maxsim_top_k(const hs_mv_store *st, const float *Q, int64_t m, int metric,
                    const uint64_t *bits, int64_t nwords, int64_t k, float *out_score,
                    int64_t *out_slot, int64_t *kept);

/* Exact MaxSim of Q against each of n given slots (rescoring); NaN for a slot that is
 * outside the store or holds nothing. */
int hs_maxsim_of(const hs_mv_store *st, const int64_t *slots, int64_t n, const float *Q,
                 int64_t m, int metric, float *out);

#endif
