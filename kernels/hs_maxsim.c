/* Exact MaxSim over a token store: see hs_maxsim.h for the layout and the blocking. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hs_maxsim.h"
#include "hs_bitset.h"
#include "hs_distance.h"
#include "hs_topk.h"

#define GROUP HS_TILE_Q  /* document rows per tile */
#define COLS HS_TILE_R   /* query rows per tile */

/* One query, prepared once per call: transposed, scaled, padded to whole tiles. */
typedef struct {
    int metric;
    int64_t d, m, ldq, ng;  /* ng tiles of COLS query rows; ldq = ng * COLS */
    float *qt;              /* d x ldq: column t is query row t (unit length for cosine) */
    float *mul, *add;       /* ldq: the tile's per-column affine map (2x for l2) */
    float *qsq;             /* ldq: |q|^2 (l2) */
    float *best;            /* ldq: the running max of the current document */
    float *tile;            /* ng x GROUP x COLS: the last group's dot products */
    float *pad;             /* GROUP x d: a last group that runs past the store, zero padded */
    float *dist;            /* HS_MAXSIM_MAX_ROWS: one query row's l2 distances (exact l2) */
    float thr[GROUP];       /* +inf: the tile's "may enter the top-k" masks are not used */
    void *block;
} mq_t;

static int mq_init(mq_t *q, const float *Q, int64_t m, int64_t d, int metric) {
    q->metric = metric;
    q->d = d;
    q->m = m;
    q->ng = (m + COLS - 1) / COLS;
    q->ldq = q->ng * COLS;
    size_t nf = (size_t)d * q->ldq + 4 * (size_t)q->ldq + (size_t)q->ng * GROUP * COLS +
                (size_t)GROUP * d + HS_MAXSIM_MAX_ROWS;
    float *b = (float *)calloc(nf, sizeof(float));
    if (!b) return HS_ENOMEM;
    q->block = b;
    q->qt = b;
    b += (size_t)d * q->ldq;
    q->mul = b;
    b += q->ldq;
    q->add = b;
    b += q->ldq;
    q->qsq = b;
    b += q->ldq;
    q->best = b;
    b += q->ldq;
    q->tile = b;
    b += (size_t)q->ng * GROUP * COLS;
    q->pad = b;
    b += (size_t)GROUP * d;
    q->dist = b;
    for (int i = 0; i < GROUP; i++) q->thr[i] = INFINITY;
    for (int64_t t = 0; t < q->ldq; t++) q->mul[t] = metric == HS_METRIC_L2 ? 2.0f : 1.0f;
    for (int64_t t = 0; t < m; t++) {
        const float *row = Q + t * d;
        float sq = hs_dot(row, row, d);
        float scale = 1.0f;
        if (metric == HS_METRIC_COSINE) scale = sq > 0 ? 1.0f / sqrtf(sq) : 0.0f;
        q->qsq[t] = sq;
        for (int64_t j = 0; j < d; j++) q->qt[j * q->ldq + t] = row[j] * scale;
    }
    return HS_OK;
}

static void mq_free(mq_t *q) { free(q->block); }

static inline void reset_best(mq_t *q) {
    for (int64_t t = 0; t < q->ldq; t++) q->best[t] = -INFINITY;
}

/* Dot products of store rows [r0, r0 + GROUP) with every query row, into q->tile. */
static void group_tiles(const hs_mv_store *st, mq_t *q, int64_t r0) {
    const int64_t d = q->d;
    const float *x = st->rows + r0 * d;
    if (r0 + GROUP > st->n_rows) {
        /* the store keeps no slack rows (it may be a mapped snapshot): copy the tail */
        int64_t have = st->n_rows - r0;
        memcpy(q->pad, x, (size_t)have * d * sizeof(float));
        memset(q->pad + have * d, 0, (size_t)(GROUP - have) * d * sizeof(float));
        x = q->pad;
    }
    uint32_t masks[GROUP];
    for (int64_t g = 0; g < q->ng; g++)
        hs_score_tile(q->qt + g * COLS, q->ldq, d, x, q->mul + g * COLS, q->add + g * COLS,
                      q->thr, q->tile + g * GROUP * COLS, masks);
}

/* best = max(best, tile row i * a + b): document row i of the group against every query row.
 * a, b turn a dot product into the metric's ranking key (1 / |x| for cosine; -|x|^2 after
 * the tile's 2x for l2, so that |q|^2 - key = |q - x|^2). */
static inline void fold_row(mq_t *q, int64_t i, float a, float b) {
    for (int64_t g = 0; g < q->ng; g++) {
        const float *o = q->tile + g * GROUP * COLS + i * COLS;
        float *bb = q->best + g * COLS;
        for (int t = 0; t < COLS; t++) {
            float v = o[t] * a + b;
            bb[t] = v > bb[t] ? v : bb[t];
        }
    }
}

static inline void row_affine(const hs_mv_store *st, int metric, int64_t r, float *a, float *b) {
    *a = metric == HS_METRIC_COSINE ? st->inv_norm[r] : 1.0f;
    *b = metric == HS_METRIC_L2 ? -st->sq_norm[r] : 0.0f;
}

static float finish_doc(const mq_t *q) {
    double s = 0;
    if (q->metric == HS_METRIC_L2) {
        for (int64_t t = 0; t < q->m; t++) {
            float e = q->qsq[t] - q->best[t];
            s -= sqrt(e > 0 ? (double)e : 0.0);
        }
    } else {
        for (int64_t t = 0; t < q->m; t++) s += q->best[t];
    }
    return (float)s;
}

static int slot_rows(const hs_mv_store *st, int64_t slot, int64_t *off, int64_t *cnt) {
    if (slot < 0 || slot >= st->n_slots || st->slot_cnt[slot] <= 0) return 0;
    *off = st->slot_off[slot];
    *cnt = st->slot_cnt[slot];
    if (*cnt > HS_MAXSIM_MAX_ROWS || *off < 0 || *off > st->n_rows - *cnt) return -1;
    return 1;
}

/* l2 straight from the differences: the 2q.x - |x|^2 key of the scan loses the small
 * distances to cancellation, so what is returned is recomputed this way. */
static float exact_l2(const hs_mv_store *st, mq_t *q, const float *Q, int64_t off, int64_t cnt) {
    double s = 0;
    for (int64_t t = 0; t < q->m; t++) {
        hs_l2sq_rows(st->rows, q->d, NULL, cnt, off, Q + t * q->d, q->dist);
        float lo = q->dist[0];
        for (int64_t i = 1; i < cnt; i++) lo = q->dist[i] < lo ? q->dist[i] : lo;
        s -= sqrt((double)lo);
    }
    return (float)s;
}

/* Exact MaxSim of one slot's rows [off, off + cnt) by the tiles. */
static float tile_doc(const hs_mv_store *st, mq_t *q, int64_t off, int64_t cnt) {
    reset_best(q);
    for (int64_t r0 = off; r0 < off + cnt; r0 += GROUP) {
        group_tiles(st, q, r0);
        int64_t hi = off + cnt - r0 < GROUP ? off + cnt - r0 : GROUP;
        for (int64_t i = 0; i < hi; i++) {
            float a, b;
            row_affine(st, q->metric, r0 + i, &a, &b);
            fold_row(q, i, a, b);
        }
    }
    return finish_doc(q);
}

static int valid_args(const hs_mv_store *st, const float *Q, int64_t m, int metric) {
    if (!st || st->d <= 0 || st->n_rows < 0 || st->n_slots < 0 || m <= 0 || !Q) return 0;
    if (st->n_rows > 0 && (!st->rows || !st->inv_norm || !st->sq_norm || !st->row_slot)) return 0;
    if (st->n_slots > 0 && (!st->slot_off || !st->slot_cnt)) return 0;
    return metric == HS_METRIC_IP || metric == HS_METRIC_COSINE || metric == HS_METRIC_L2;
}

int hs_maxsim_top_k(const hs_mv_store *st, const float *Q, int64_t m, int metric,
                    const uint64_t *bits, int64_t nwords, int64_t k, float *out_score,
                    int64_t *out_slot, int64_t *kept) {
    *kept = 0;
    if (!valid_args(st, Q, m, metric) || k < 0 || nwords < 0) return HS_EINVAL;
    if (k == 0) return HS_OK;
    mq_t q;
    int rc = mq_init(&q, Q, m, st->d, metric);
    if (rc != HS_OK) return rc;
    hs_heap h;
    hs_heap_init(&h, out_score, out_slot, k);
    int64_t cur = -1;
    int want = 0;
    rc = HS_OK;
    /* rows in store order, 8 at a time: a document is folded row by row as its rows pass,
     * so documents that share a group share its tiles, and a group without a wanted row
     * (dead rows, filtered-out documents) costs no multiply */
    for (int64_t r0 = 0; r0 < st->n_rows && rc == HS_OK; r0 += GROUP) {
        int64_t hi = st->n_rows - r0 < GROUP ? st->n_rows - r0 : GROUP;
        int computed = 0;
        for (int64_t i = 0; i < hi; i++) {
            int64_t r = r0 + i, s = st->row_slot[r];
            if (s != cur) {
                if (want) {
                    float sc = finish_doc(&q);
                    if (sc >= hs_heap_threshold(&h)) hs_heap_push(&h, sc, cur);
                }
                if (s >= st->n_slots) { rc = HS_EINVAL; break; }
                cur = s;
                want = s >= 0 && (!bits || ((s >> 6) < nwords && hs_bit(bits, s)));
                if (want) reset_best(&q);
            }
            if (!want) continue;
            if (!computed) {
                group_tiles(st, &q, r0);
                computed = 1;
            }
            float a, b;
            row_affine(st, metric, r, &a, &b);
            fold_row(&q, i, a, b);
        }
    }
    if (rc == HS_OK && want) {
        float sc = finish_doc(&q);
        if (sc >= hs_heap_threshold(&h)) hs_heap_push(&h, sc, cur);
    }
    int64_t n = hs_heap_finish(&h);
    if (rc == HS_OK && metric == HS_METRIC_L2) {
        for (int64_t i = 0; i < n && rc == HS_OK; i++) {
            int64_t off, cnt;
            if (slot_rows(st, out_slot[i], &off, &cnt) != 1) rc = HS_EINVAL;
            else out_score[i] = exact_l2(st, &q, Q, off, cnt);
        }
        /* the exact distances may reorder near-ties: insertion sort, best first */
        for (int64_t i = 1; i < n; i++) {
            float s = out_score[i];
            int64_t id = out_slot[i], j = i - 1;
            while (j >= 0 && hs_worse(out_score[j], out_slot[j], s, id)) {
                out_score[j + 1] = out_score[j];
                out_slot[j + 1] = out_slot[j];
                j--;
            }
            out_score[j + 1] = s;
            out_slot[j + 1] = id;
        }
    }
    mq_free(&q);
    if (rc != HS_OK) {
        for (int64_t i = 0; i < k; i++) {
            out_score[i] = -INFINITY;
            out_slot[i] = -1;
        }
        return rc;
    }
    *kept = n;
    return HS_OK;
}

int hs_maxsim_of(const hs_mv_store *st, const int64_t *slots, int64_t n, const float *Q,
                 int64_t m, int metric, float *out) {
    if (!valid_args(st, Q, m, metric) || n < 0 || (n > 0 && (!slots || !out))) return HS_EINVAL;
    if (n == 0) return HS_OK;
    mq_t q;
    int rc = mq_init(&q, Q, m, st->d, metric);
    if (rc != HS_OK) return rc;
    for (int64_t i = 0; i < n; i++) {
        int64_t off, cnt;
        int has = slot_rows(st, slots[i], &off, &cnt);
        if (has < 0) {
            rc = HS_EINVAL;
            break;
        }
        if (!has) out[i] = NAN;
        else if (metric == HS_METRIC_L2) out[i] = exact_l2(st, &q, Q, off, cnt);
        else out[i] = tile_doc(st, &q, off, cnt);
    }
    mq_free(&q);
    return rc;
}
