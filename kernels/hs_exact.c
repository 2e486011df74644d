/* Exact search: one pass over the vector block per query (few queries) or per
 * block of queries (register-blocked tiles: each row is read once for all of
 * them). Candidates are compared to each query's current k-th best with SIMD
 * before touching the heap, so the heap is rarely visited. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hs_exact.h"
#include "hs_distance.h"
#include "hs_topk.h"

#define CHUNK 1024       /* rows scored per call in the single-query path */
#define BLOCK_ROWS 256   /* rows packed (transposed) per block in the batched path */
#define BATCH_MIN 4      /* from this many queries the batched path wins */

/* Walks the candidate rows: every row below n, or the set bits of a bitset. */
typedef struct {
    const uint64_t *bits;
    int64_t n, next_row, word;
    uint64_t cur;
} row_cursor;

static void cursor_init(row_cursor *c, const uint64_t *bits, int64_t n) {
    c->bits = bits;
    c->n = n;
    c->next_row = 0;
    c->word = 0;
    c->cur = (bits && n > 0) ? bits[0] : 0;
}

/* Fills out with up to limit row ids; returns how many (0 at the end).
 * Returns -1 in *contiguous_start when the rows are a contiguous range. */
static int64_t cursor_next(row_cursor *c, int64_t limit, int64_t *out, int64_t *range_start) {
    if (!c->bits) {
        int64_t cnt = c->n - c->next_row;
        if (cnt > limit) cnt = limit;
        *range_start = c->next_row;
        c->next_row += cnt;
        return cnt;
    }
    *range_start = -1;
    int64_t nw = (c->n + 63) / 64, cnt = 0;
    while (cnt < limit && c->word < nw) {
        if (!c->cur) {
            if (++c->word < nw) c->cur = c->bits[c->word];
            continue;
        }
        int64_t r = c->word * 64 + __builtin_ctzll(c->cur);
        c->cur &= c->cur - 1;
        if (r >= c->n) { c->word = nw; break; }
        out[cnt++] = r;
    }
    return cnt;
}

static float query_norm_inv(const float *q, int64_t d) {
    float s = hs_dot(q, q, d);
    return s > 0 ? 1.0f / sqrtf(s) : 0.0f;
}

/* Turns selection keys into the user-facing scores and restores best-first order. */
static void finish_query(const float *X, int64_t d, const float *q, int metric,
                         float qinv, hs_heap *h) {
    int64_t kept = hs_heap_finish(h);
    if (metric == HS_METRIC_COSINE) {
        for (int64_t i = 0; i < kept; i++) h->score[i] *= qinv;
    } else if (metric == HS_METRIC_L2) {
        /* recompute exactly: the batched path ranked by 2<q,x> - ||x||^2 */
        for (int64_t i = 0; i < kept; i++)
            h->score[i] = -sqrtf(hs_l2sq(X + h->id[i] * d, q, d));
        /* insertion sort: the exact recompute may swap near-ties */
        for (int64_t i = 1; i < kept; i++) {
            float s = h->score[i];
            int64_t id = h->id[i];
            int64_t j = i - 1;
            while (j >= 0 && hs_worse(h->score[j], h->id[j], s, id)) {
                h->score[j + 1] = h->score[j];
                h->id[j + 1] = h->id[j];
                j--;
            }
            h->score[j + 1] = s;
            h->id[j + 1] = id;
        }
    }
}

static int search_single(const float *X, int64_t n, int64_t d, const float *xaux,
                         const float *q, int metric, const uint64_t *bits, int64_t k,
                         float *out_s, int64_t *out_i) {
    float *buf = (float *)malloc(CHUNK * sizeof(float));
    int64_t *rows = (int64_t *)malloc(CHUNK * sizeof(int64_t));
    if (!buf || !rows) {
        free(buf);
        free(rows);
        return HS_ENOMEM;
    }
    hs_heap h;
    hs_heap_init(&h, out_s, out_i, k);
    row_cursor cur;
    cursor_init(&cur, bits, n);
    int64_t start, cnt;
    while ((cnt = cursor_next(&cur, CHUNK, rows, &start)) > 0) {
        const int64_t *rp = start >= 0 ? NULL : rows;
        if (metric == HS_METRIC_L2) {
            hs_l2sq_rows(X, d, rp, cnt, start, q, buf);
            for (int64_t i = 0; i < cnt; i++) buf[i] = -buf[i];
        } else {
            hs_dot_rows(X, d, rp, cnt, start, q, buf);
            if (metric == HS_METRIC_COSINE) {
                for (int64_t i = 0; i < cnt; i++) buf[i] *= xaux[rp ? rp[i] : start + i];
            }
        }
        float thr = hs_heap_threshold(&h);
        for (int64_t i = 0; i < cnt; i++) {
            if (buf[i] >= thr) {
                hs_heap_push(&h, buf[i], rp ? rp[i] : start + i);
                thr = hs_heap_threshold(&h);
            }
        }
    }
    int64_t kept = hs_heap_finish(&h);
    if (metric == HS_METRIC_COSINE) {
        float qinv = query_norm_inv(q, d);
        for (int64_t i = 0; i < kept; i++) out_s[i] *= qinv;
    } else if (metric == HS_METRIC_L2) {
        for (int64_t i = 0; i < kept; i++) out_s[i] = -sqrtf(-out_s[i]);
    }
    free(buf);
    free(rows);
    return HS_OK;
}

static int search_batched(const float *X, int64_t n, int64_t d, const float *xaux,
                          const float *Q, int64_t nq, int metric, const uint64_t *bits,
                          int64_t k, float *out_s, int64_t *out_i) {
    int64_t ntiles = (nq + HS_TILE_Q - 1) / HS_TILE_Q;
    size_t xt_bytes = (size_t)d * BLOCK_ROWS * sizeof(float);
    float *XT = (float *)aligned_alloc(64, (xt_bytes + 63) / 64 * 64);
    float *QP = (float *)calloc((size_t)ntiles * HS_TILE_Q * d, sizeof(float));
    hs_heap *heaps = (hs_heap *)malloc((size_t)nq * sizeof(hs_heap));
    int64_t *rows = (int64_t *)malloc(BLOCK_ROWS * sizeof(int64_t));
    if (!XT || !QP || !heaps || !rows) {
        free(XT); free(QP); free(heaps); free(rows);
        return HS_ENOMEM;
    }
    memcpy(QP, Q, (size_t)nq * d * sizeof(float));
    for (int64_t i = 0; i < nq; i++) hs_heap_init(&heaps[i], out_s + i * k, out_i + i * k, k);

    float mul[BLOCK_ROWS], add[BLOCK_ROWS];
    float tile[HS_TILE_Q * HS_TILE_R], thr[HS_TILE_Q];
    uint32_t masks[HS_TILE_Q];
    row_cursor cur;
    cursor_init(&cur, bits, n);
    int64_t start, cnt;
    while ((cnt = cursor_next(&cur, BLOCK_ROWS, rows, &start)) > 0) {
        if (start >= 0)
            for (int64_t t = 0; t < cnt; t++) rows[t] = start + t;
        /* pack transposed so the tile kernel reads 32 rows of one dimension at once */
        for (int64_t t = 0; t < cnt; t++) {
            const float *x = X + rows[t] * d;
            for (int64_t j = 0; j < d; j++) XT[j * BLOCK_ROWS + t] = x[j];
            if (metric == HS_METRIC_COSINE) { mul[t] = xaux[rows[t]]; add[t] = 0.0f; }
            else if (metric == HS_METRIC_L2) { mul[t] = 2.0f; add[t] = -xaux[rows[t]]; }
            else { mul[t] = 1.0f; add[t] = 0.0f; }
        }
        int64_t padded = (cnt + HS_TILE_R - 1) / HS_TILE_R * HS_TILE_R;
        for (int64_t t = cnt; t < padded; t++) {
            for (int64_t j = 0; j < d; j++) XT[j * BLOCK_ROWS + t] = 0.0f;
            mul[t] = 0.0f;
            add[t] = -INFINITY;
        }
        for (int64_t qt = 0; qt < ntiles; qt++) {
            int64_t q0 = qt * HS_TILE_Q;
            int64_t nqt = nq - q0 < HS_TILE_Q ? nq - q0 : HS_TILE_Q;
            for (int64_t sb = 0; sb < padded; sb += HS_TILE_R) {
                for (int64_t i = 0; i < HS_TILE_Q; i++)
                    thr[i] = i < nqt ? hs_heap_threshold(&heaps[q0 + i]) : INFINITY;
                hs_score_tile(XT + sb, BLOCK_ROWS, d, QP + q0 * d, mul + sb, add + sb, thr,
                              tile, masks);
                for (int64_t i = 0; i < nqt; i++) {
                    uint32_t m = masks[i];
                    while (HS_UNLIKELY(m)) {
                        int t = __builtin_ctz(m);
                        m &= m - 1;
                        if (sb + t < cnt) hs_heap_push(&heaps[q0 + i], tile[i * HS_TILE_R + t], rows[sb + t]);
                    }
                }
            }
        }
    }
    for (int64_t i = 0; i < nq; i++) {
        const float *q = Q + i * d;
        float qinv = metric == HS_METRIC_COSINE ? query_norm_inv(q, d) : 1.0f;
        finish_query(X, d, q, metric, qinv, &heaps[i]);
    }
    free(XT); free(QP); free(heaps); free(rows);
    return HS_OK;
}

int hs_exact_search(const float *X, int64_t n, int64_t d, const float *xaux,
                    const float *Q, int64_t nq, int metric, const uint64_t *bits,
                    int64_t k, float *out_scores, int64_t *out_ids) {
    if (d <= 0 || n < 0 || nq < 0 || k < 0) return HS_EINVAL;
    if (metric != HS_METRIC_IP && metric != HS_METRIC_COSINE && metric != HS_METRIC_L2)
        return HS_EINVAL;
    if (metric != HS_METRIC_IP && !xaux && n > 0) return HS_EINVAL;
    if (k == 0 || nq == 0) return HS_OK;
    if (nq >= BATCH_MIN)
        return search_batched(X, n, d, xaux, Q, nq, metric, bits, k, out_scores, out_ids);
    for (int64_t i = 0; i < nq; i++) {
        int rc = search_single(X, n, d, xaux, Q + i * d, metric, bits, k,
                               out_scores + i * k, out_ids + i * k);
        if (rc != HS_OK) return rc;
    }
    return HS_OK;
}
