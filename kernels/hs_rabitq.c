/* RaBitQ-style codes: rotation, encoding, estimates with bounds, and the exact scan
 * (see hs_rabitq.h for the maths). Work per vector is done in double so that the only
 * float32 roundings are those of the stored factors, which the bounds' slack covers. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hs_rabitq.h"
#include "hs_rabitq_kern.h"
#include "hs_distance.h"
#include "hs_topk.h"

#define CHUNK 1024
#define QLEVELS 255.0 /* query quantisation: 8-bit unsigned */
/* relative float32 rounding of a stored factor, with room to spare */
#define FACT_EPS 1e-6

int64_t hs_rq_dp(int64_t d) { return d > 0 ? (d + 63) / 64 * 64 : 0; }

int64_t hs_rq_code_bytes(int64_t d, int bits) {
    if (d <= 0 || (bits != 1 && bits != 4)) return 0;
    return hs_rq_dp(d) * bits / 8;
}

/* ------------------------------------------------------------- rotation */

typedef struct {
    int64_t dp, blk;
    int8_t *sign;  /* HS_RQ_ROUNDS x dp */
    int32_t *perm; /* HS_RQ_ROUNDS x dp */
    double *tmp;
} rot;

static void rot_free(rot *r) {
    free(r->sign), free(r->perm), free(r->tmp);
    r->sign = NULL, r->perm = NULL, r->tmp = NULL;
}

static int rot_init(rot *r, int64_t d, uint64_t seed) {
    r->dp = hs_rq_dp(d);
    r->blk = r->dp & -r->dp; /* largest power of two dividing dp */
    r->sign = malloc((size_t)(HS_RQ_ROUNDS * r->dp));
    r->perm = malloc((size_t)(HS_RQ_ROUNDS * r->dp) * sizeof(int32_t));
    r->tmp = malloc((size_t)r->dp * sizeof(double));
    if (!r->sign || !r->perm || !r->tmp) {
        rot_free(r);
        return HS_ENOMEM;
    }
    uint64_t s = seed ^ ((uint64_t)r->dp * 0xD1B54A32D192ED03ull);
    for (int t = 0; t < HS_RQ_ROUNDS; t++) {
        int8_t *sg = r->sign + t * r->dp;
        int32_t *pm = r->perm + t * r->dp;
        for (int64_t i = 0; i < r->dp; i++) {
            sg[i] = (hs_splitmix64(&s) >> 63) ? 1 : -1;
            pm[i] = (int32_t)i;
        }
        for (int64_t i = r->dp - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t j = (int64_t)(hs_splitmix64(&s) % (uint64_t)(i + 1));
            int32_t t2 = pm[i];
            pm[i] = pm[j], pm[j] = t2;
        }
    }
    return HS_OK;
}

static void fwht(double *x, int64_t m) {
    for (int64_t h = 1; h < m; h <<= 1)
        for (int64_t i = 0; i < m; i += h << 1)
            for (int64_t j = i; j < i + h; j++) {
                double a = x[j], b = x[j + h];
                x[j] = a + b, x[j + h] = a - b;
            }
}

/* x (dp values) <- P x */
/* x (dp values) <- P x, with dp doubles of scratch (callers sharing one rotation across
 * threads pass their own) */
static void rot_apply_with(const rot *r, double *x, double *tmp) {
    const double scale = 1.0 / sqrt((double)r->blk);
    for (int t = 0; t < HS_RQ_ROUNDS; t++) {
        const int8_t *sg = r->sign + t * r->dp;
        const int32_t *pm = r->perm + t * r->dp;
        for (int64_t i = 0; i < r->dp; i++) tmp[i] = sg[i] * x[pm[i]];
        for (int64_t b = 0; b < r->dp; b += r->blk) fwht(tmp + b, r->blk);
        for (int64_t i = 0; i < r->dp; i++) x[i] = tmp[i] * scale;
    }
}

static void rot_apply(const rot *r, double *x) { rot_apply_with(r, x, r->tmp); }

int hs_rq_rotate(int64_t d, uint64_t seed, const float *X, int64_t n, double *out) {
    if (d <= 0 || n < 0) return HS_EINVAL;
    rot r;
    if (rot_init(&r, d, seed)) return HS_ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        double *y = out + i * r.dp;
        for (int64_t j = 0; j < r.dp; j++) y[j] = j < d ? X[i * d + j] : 0.0;
        rot_apply(&r, y);
    }
    rot_free(&r);
    return HS_OK;
}

/* ------------------------------------------------------------- encoding */

static int params_ok(const hs_rq_params *p) {
    return p->d > 0 && (p->bits == 1 || p->bits == 4) && p->centroid &&
           (p->metric == HS_METRIC_IP || p->metric == HS_METRIC_COSINE || p->metric == HS_METRIC_L2);
}

/* v (d values) <- the row as the codes see it: unit length under cosine (zero stays zero) */
static void load_row(const float *x, int64_t d, int metric, double *v) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) v[j] = x[j], s += v[j] * v[j];
    if (metric == HS_METRIC_COSINE && s > 0) {
        double inv = 1.0 / sqrt(s);
        for (int64_t j = 0; j < d; j++) v[j] *= inv;
    }
}

/* 4-bit grid code of the unit vector o: the scale t = f max|o| / 7.5 (f on a grid) whose
 * rounding u = clamp(floor(o / t + 8), 0, 15) maximises cos(u - 7.5, o). */
/* a bound coefficient stored rounded up, never down, so the bounds stay true */
static float up(double v) {
    float f = (float)v;
    return (double)f < v ? nextafterf(f, INFINITY) : f;
}

/* The stored factors of a vector at distance r from the centroid whose code has
 * a = <xbar, o> and xbar = code * nrm: everything a query needs per row, so that scoring
 * a row takes no division and no square root. */
static void set_factors(double r, double a, double cnt, double nrm, float *f) {
    f[0] = (float)r;
    f[1] = (float)(r * nrm / a);
    f[2] = (float)cnt;
    f[3] = up(a < 1.0 ? r * sqrt(1.0 - a * a) / a : 0.0);
}

/* floor(y) clamped to [0, 15], without branches: y is finite and below 2^31, and truncation is
 * floor for y >= 0 (the compiler's floor without SSE4.1 is a branchy sequence, and this loop runs
 * 17 times per row) */
static inline double level4(double y) {
    y = y < 0 ? 0 : y;
    int u = (int)y;
    return (double)(u > 15 ? 15 : u);
}

static void encode4(const double *o, int64_t dp, double r, uint8_t *code, float *f) {
    double m = 0;
    for (int64_t i = 0; i < dp; i++) m = fabs(o[i]) > m ? fabs(o[i]) : m;
    double best = -1, best_t = m / 7.5;
    for (int g = 0; g <= 16; g++) {
        double t = (0.2 + 0.05 * g) * m / 7.5, dot = 0, nn = 0;
        for (int64_t i = 0; i < dp; i++) {
            double u = level4(o[i] / t + 8.0);
            dot += (u - 7.5) * o[i], nn += (u - 7.5) * (u - 7.5);
        }
        double c = dot / sqrt(nn);
        if (c > best) best = c, best_t = t;
    }
    double dot = 0, nn = 0, sum = 0;
    memset(code, 0, (size_t)(dp / 2));
    for (int64_t i = 0; i < dp; i++) {
        double u = level4(o[i] / best_t + 8.0);
        code[i >> 1] |= (uint8_t)((int)u << ((i & 1) * 4));
        dot += (u - 7.5) * o[i], nn += (u - 7.5) * (u - 7.5), sum += u;
    }
    set_factors(r, dot / sqrt(nn), sum, 1.0 / sqrt(nn), f);
}

static void encode1(const double *o, int64_t dp, double r, uint8_t *code, float *f) {
    double l1 = 0;
    int64_t pop = 0;
    memset(code, 0, (size_t)(dp / 8));
    for (int64_t i = 0; i < dp; i++) {
        l1 += fabs(o[i]);
        if (o[i] > 0) code[i >> 3] |= (uint8_t)(1u << (i & 7)), pop++;
    }
    set_factors(r, l1 / sqrt((double)dp), (double)pop, 1.0 / sqrt((double)dp), f);
}

/* one row's code and factors; v and tmp: dp doubles each */
static void encode_row(const hs_rq_params *p, const rot *r, const float *x, uint8_t *code,
                       float *f, double *v, double *tmp) {
    const int64_t d = p->d, dp = r->dp;
    load_row(x, d, p->metric, v);
    double rr = 0;
    for (int64_t j = 0; j < d; j++) v[j] -= p->centroid[j], rr += v[j] * v[j];
    for (int64_t j = d; j < dp; j++) v[j] = 0;
    rr = sqrt(rr);
    if (rr > 0) {
        rot_apply_with(r, v, tmp);
        for (int64_t j = 0; j < dp; j++) v[j] /= rr;
    } else { /* x = c: any unit direction; r = 0 makes the estimate exact */
        for (int64_t j = 0; j < dp; j++) v[j] = 1.0 / sqrt((double)dp);
    }
    if (p->bits == 1) encode1(v, dp, rr, code, f);
    else encode4(v, dp, rr, code, f);
}

int hs_rq_encode(const hs_rq_params *p, const float *X, int64_t n, uint8_t *codes,
                 float *factors) {
    if (!params_ok(p) || n < 0) return HS_EINVAL;
    rot r;
    if (rot_init(&r, p->d, p->seed)) return HS_ENOMEM;
    const int64_t d = p->d, dp = r.dp, cb = hs_rq_code_bytes(d, p->bits);
    double *v = calloc((size_t)dp, sizeof(double));
    if (!v) {
        rot_free(&r);
        return HS_ENOMEM;
    }
    for (int64_t i = 0; i < n; i++)
        encode_row(p, &r, X + i * d, codes + i * cb, factors + i * HS_RQ_NFACT, v, r.tmp);
    free(v);
    rot_free(&r);
    return HS_OK;
}

/* ------------------------------------------------------------- queries */

typedef struct {
    double qn;      /* ||q'|| */
    double lo, dl;  /* q'_i ~ lo + dl u_i */
    double ka, kb, kc, qt; /* see rq_eval */
    double cq, qc2; /* <c, q> (ip, cosine), ||q - c||^2 (l2) */
    double qsq;     /* ||q||^2 of the query as scored (unit under cosine) */
    double cn;      /* ||c|| */
    uint64_t *pack; /* the kernel's query (hs_rabitq_kern.h) */
} qprep;

static int qprep_alloc(qprep *qp, int64_t dp) {
    /* 1 bit: 8 planes of dp bits, then dp bytes of u; 4 bits: dp bytes */
    qp->pack = calloc((size_t)(dp / 4), sizeof(uint64_t));
    return qp->pack ? HS_OK : HS_ENOMEM;
}

/* v: dp doubles of scratch. Returns HS_EINVAL for a query that is not finite. */
static int qprep_make(const hs_rq_params *p, const rot *r, const float *q, double *v, double *tmp,
                      qprep *qp) {
    const int64_t d = p->d, dp = r->dp;
    load_row(q, d, p->metric, v);
    double cq = 0, qsq = 0, cn = 0;
    for (int64_t j = 0; j < d; j++) {
        if (!isfinite(v[j])) return HS_EINVAL;
        cq += p->centroid[j] * v[j], qsq += v[j] * v[j], cn += (double)p->centroid[j] * p->centroid[j];
    }
    qp->cq = cq, qp->qsq = qsq, qp->cn = sqrt(cn);
    if (p->metric == HS_METRIC_L2)
        for (int64_t j = 0; j < d; j++) v[j] -= p->centroid[j];
    for (int64_t j = d; j < dp; j++) v[j] = 0;
    rot_apply_with(r, v, tmp);
    double lo = v[0], hi = v[0], nn = 0;
    for (int64_t j = 0; j < dp; j++) {
        lo = v[j] < lo ? v[j] : lo, hi = v[j] > hi ? v[j] : hi;
        nn += v[j] * v[j];
    }
    qp->qn = sqrt(nn);
    qp->qc2 = nn; /* under l2, q' = P(q - c) and P keeps lengths */
    qp->lo = lo, qp->dl = (hi - lo) / QLEVELS;
    double su = 0, qerr = 0;
    uint8_t *bytes = (uint8_t *)qp->pack;
    const int64_t W = dp / 64;
    memset(qp->pack, 0, (size_t)(2 * dp));
    for (int64_t j = 0; j < dp; j++) {
        int u = 0;
        if (qp->dl > 0) {
            u = (int)floor((v[j] - lo) / qp->dl + 0.5);
            u = u < 0 ? 0 : u > 255 ? 255 : u;
        }
        double e = fabs(v[j] - (lo + qp->dl * u));
        qerr = e > qerr ? e : qerr;
        su += u;
        if (p->bits == 1) {
            for (int b = 0; b < 8; b++)
                if ((u >> b) & 1) qp->pack[b * W + (j >> 6)] |= (uint64_t)1 << (j & 63);
            bytes[dp + j] = (uint8_t)u;
        } else {
            bytes[(j & 1) * (dp / 2) + (j >> 1)] = (uint8_t)u;
        }
    }
    /* the quantised value is itself a rounded double: a relative 1e-12 of its size covers it */
    qerr += 1e-12 * (fabs(lo) + fabs(hi));
    /* <code, q~'> = ka cnt + kb S + kc, code = 2b - 1 (1 bit) or u - 7.5 (4 bits); the query's
     * quantisation moves <code, q'> by at most ||code||_1 qerr: dp qerr, or 7.5 dp qerr */
    if (p->bits == 1) {
        qp->ka = 2.0 * lo, qp->kb = 2.0 * qp->dl, qp->kc = -(lo * dp + qp->dl * su);
        qp->qt = (double)dp * qerr;
    } else {
        qp->ka = lo, qp->kb = qp->dl, qp->kc = -7.5 * (lo * dp + qp->dl * su);
        qp->qt = 7.5 * dp * qerr;
    }
    return HS_OK;
}

/* The estimate (distance^2 for l2, inner product otherwise) of one coded vector from its
 * integer code product S, and the half-widths of the hard bound and of the probabilistic one
 * (kprob = eps0 / sqrt(dp - 1)), float32-rounding slack included. With the factors of
 * set_factors: r <o, q'> ~ f1 (ka cnt + kb S + kc) (= r <xbar, q~'> / a), the rotation term
 * of the bound is ||q'|| f3 (x kprob), the query quantisation's f1 qt. */
static inline void rq_eval(int l2, const qprep *qp, const float *f, int32_t S, double kprob,
                           double *est, double *bhard, double *bprob) {
    const double r = f[0], reo = f[1] * (qp->ka * f[2] + qp->kb * S + qp->kc);
    const double rot = qp->qn * f[3], quant = f[1] * qp->qt;
    if (l2) {
        *est = r * r + qp->qc2 - 2.0 * reo;
        double slack = FACT_EPS * (r * r + qp->qc2 + 2.0 * (fabs(reo) + r * qp->qn));
        *bhard = 2.0 * (rot + quant) + slack;
        *bprob = 2.0 * (rot * kprob + quant) + slack;
    } else {
        *est = reo + qp->cq;
        double slack = FACT_EPS * (fabs(reo) + r * qp->qn + fabs(qp->cq));
        *bhard = rot + quant + slack;
        *bprob = rot * kprob + quant + slack;
    }
}

int hs_rq_estimate(const hs_rq_params *p, const uint8_t *codes, const float *factors,
                   const int64_t *rows, int64_t n, const float *Q, int64_t nq, double eps0,
                   float *est, float *bprob, float *bhard) {
    if (!params_ok(p) || n < 0 || nq < 0) return HS_EINVAL;
    if (n == 0 || nq == 0) return HS_OK;
    rot r;
    if (rot_init(&r, p->d, p->seed)) return HS_ENOMEM;
    const int64_t dp = r.dp, cb = hs_rq_code_bytes(p->d, p->bits);
    hs_rq_dots_fn dots = hs_rq_dots_impl(p->bits);
    const int l2 = p->metric == HS_METRIC_L2;
    const double kprob = eps0 / sqrt((double)(dp - 1));
    qprep qp = {0};
    double *v = malloc((size_t)dp * sizeof(double));
    int32_t *S = malloc(CHUNK * sizeof(int32_t));
    int rc = (v && S && qprep_alloc(&qp, dp) == HS_OK) ? HS_OK : HS_ENOMEM;
    for (int64_t t = 0; t < nq && rc == HS_OK; t++) {
        rc = qprep_make(p, &r, Q + t * p->d, v, r.tmp, &qp);
        for (int64_t i0 = 0; i0 < n && rc == HS_OK; i0 += CHUNK) {
            int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
            dots(codes, cb, cb, rows ? rows + i0 : NULL, m, i0, (const uint8_t *)qp.pack, S);
            for (int64_t i = 0; i < m; i++) {
                int64_t row = rows ? rows[i0 + i] : i0 + i, o = t * n + i0 + i;
                double e, bp, bh;
                rq_eval(l2, &qp, factors + row * HS_RQ_NFACT, S[i], kprob, &e, &bh, &bp);
                est[o] = (float)e;
                if (bprob) bprob[o] = (float)bp;
                if (bhard) bhard[o] = (float)bh;
            }
        }
    }
    free(v), free(S), free(qp.pack);
    rot_free(&r);
    return rc;
}

/* ------------------------------------------------------------- the scan */

HS_DEFINE_KTH_PUSH(kth_push, double)

/* Up to CHUNK candidate rows from *pos on: a contiguous range (returns its count, *start set,
 * rows untouched) or, with a bitset, the next set bits (returned in rows, *start = -1). */
static int64_t next_rows(const uint64_t *bits, int64_t n, int64_t *pos, int64_t *rows,
                         int64_t *start) {
    if (!bits) {
        int64_t c = n - *pos < CHUNK ? n - *pos : CHUNK;
        *start = *pos;
        *pos += c;
        return c;
    }
    *start = -1;
    int64_t c = 0;
    while (c < CHUNK && *pos < n) {
        int64_t w = *pos >> 6;
        uint64_t word = bits[w] & (~(uint64_t)0 << (*pos & 63));
        if (!word) {
            *pos = (w + 1) << 6;
            continue;
        }
        int64_t row = (w << 6) + __builtin_ctzll(word);
        if (row >= n) {
            *pos = n;
            break;
        }
        rows[c++] = row;
        *pos = row + 1;
    }
    return c;
}

/* The float32 key of a rescored row: squared distance (l2), else minus the similarity,
 * computed as hs_exact_search does. */
static float exact_key(const hs_rq_params *p, const float *x, const float *q, float qinv) {
    if (p->metric == HS_METRIC_L2) return hs_l2sq(x, q, p->d);
    float s = hs_dot(x, q, p->d);
    if (p->metric == HS_METRIC_COSINE) {
        float xx = hs_dot(x, x, p->d);
        s *= (xx > 0 ? 1.0f / sqrtf(xx) : 0.0f) * qinv;
    }
    return -s;
}

typedef struct {
    double *lo, *kth;
    int64_t *id;
    int32_t *S;
    int64_t *rows;
    double *v;
    double *key, *err; /* CHUNK each */
} scan_buf;

/* Scores by the estimate alone (higher is better) of cnt rows with code products S: a loop
 * of its own, without branches, so the compiler vectorises it. */
static void estimate_chunk(int l2, const qprep *qp, const float *restrict factors, int64_t fs,
                           const int64_t *rp, int64_t start, int64_t cnt,
                           const int32_t *restrict S, double *restrict out) {
    const double ka = qp->ka, kb = qp->kb, kc = qp->kc, qc2 = qp->qc2, cq = qp->cq;
#define HS_RQ_EST(F)                                                                   \
    do {                                                                               \
        const float *f = (F);                                                          \
        double reo = f[1] * (ka * f[2] + kb * S[i] + kc); /* as rq_eval */             \
        out[i] = l2 ? 2.0 * reo - (double)f[0] * f[0] - qc2 : reo + cq;                \
    } while (0)
    if (rp) {
        for (int64_t i = 0; i < cnt; i++) HS_RQ_EST(factors + rp[i] * fs);
    } else {
        const float *f0 = factors + start * fs;
        for (int64_t i = 0; i < cnt; i++) HS_RQ_EST(f0 + i * fs);
    }
#undef HS_RQ_EST
}

/* Keys (distance-like, lower is better) and error half-widths of cnt rows, as above. */
static void bound_chunk(const hs_rq_params *p, const qprep *qp, const float *restrict factors,
                        int64_t fs, const int64_t *rp, int64_t start, int64_t cnt, const int32_t *restrict S,
                        double kprob, int hard, double gamma, double gq, double *restrict key,
                        double *restrict err) {
    const int l2 = p->metric == HS_METRIC_L2, ip = p->metric == HS_METRIC_IP;
    for (int64_t i = 0; i < cnt; i++) {
        const float *f = factors + (rp ? rp[i] : start + i) * fs;
        double est, bp, bh, xn = qp->cn + f[0];
        rq_eval(l2, qp, f, S[i], kprob, &est, &bh, &bp);
        key[i] = l2 ? est : -est;
        /* the float32 key's own rounding (see scan_one) */
        err[i] = (hard ? bh : bp) +
                 (l2 ? 2.0 * gamma * (qp->qsq + xn * xn) : ip ? gq * xn : 3.0 * gamma);
    }
}

/* Why the exact scan is exact: every row's float32 key v (what a float scan ranks by) lies
 * within e = bound + rounding of its estimate; the k-th smallest upper end U is at least the
 * k-th smallest v, so every row of the float top-k has estimate - e <= v <= U: those rows
 * alone are rescored. The rounding term covers the float32 key's own error (gamma times the
 * size of its terms; ||x|| <= ||c|| + r). */
static int scan_one(const hs_rq_params *p, const rot *r, hs_rq_dots_fn dots, const uint8_t *codes,
                    int64_t cs, const float *factors, int64_t fs, int64_t n, const float *X, const uint64_t *bits,
                    const float *q, int64_t k, int bound, double eps0, scan_buf *b, qprep *qp,
                    float *out_s, int64_t *out_i, int64_t *rescored) {
    const int64_t dp = r->dp;
    const int l2 = p->metric == HS_METRIC_L2, hard = bound == HS_RQ_BOUND_HARD;
    const double kprob = eps0 / sqrt((double)(dp - 1));
    int rc = qprep_make(p, r, q, b->v, r->tmp, qp);
    if (rc) return rc;
    const double gamma = (double)(p->d + 4) * FLT_EPSILON, gq = gamma * sqrt(qp->qsq);
    hs_heap h;
    hs_heap_init(&h, out_s, out_i, k);
    int64_t pos = 0, start, cnt, m = 0, hn = 0;
    while ((cnt = next_rows(bits, n, &pos, b->rows, &start)) > 0) {
        const int64_t *rp = start >= 0 ? NULL : b->rows;
        dots(codes, hs_rq_code_bytes(p->d, p->bits), cs, rp, cnt, start, (const uint8_t *)qp->pack, b->S);
        if (!X) { /* estimates alone: the heap sees only rows that can enter it */
            estimate_chunk(l2, qp, factors, fs, rp, start, cnt, b->S, b->key);
            float thr = hs_heap_threshold(&h);
            for (int64_t i = 0; i < cnt; i++) {
                float sc = (float)b->key[i];
                if (sc >= thr) {
                    hs_heap_push(&h, sc, rp ? rp[i] : start + i);
                    thr = hs_heap_threshold(&h);
                }
            }
            continue;
        }
        bound_chunk(p, qp, factors, fs, rp, start, cnt, b->S, kprob, hard, gamma, gq, b->key, b->err);
        for (int64_t i = 0; i < cnt; i++) {
            double key = b->key[i], e = b->err[i];
            if (hn < k || key + e < b->kth[0]) kth_push(b->kth, &hn, k, key + e);
            /* U only shrinks: a row above the current k-th upper end is above the final one */
            if (hn < k || key - e <= b->kth[0]) {
                b->lo[m] = key - e;
                b->id[m++] = rp ? rp[i] : start + i;
            }
        }
    }
    int64_t done = 0;
    if (X) {
        double U = hn == k ? b->kth[0] : INFINITY;
        float qq = hs_dot(q, q, p->d), qinv = qq > 0 ? 1.0f / sqrtf(qq) : 0.0f;
        for (int64_t i = 0; i < m; i++) {
            if (b->lo[i] > U) continue;
            done++;
            hs_heap_push(&h, -exact_key(p, X + b->id[i] * p->d, q, qinv), b->id[i]);
        }
    }
    int64_t kept = hs_heap_finish(&h);
    if (l2)
        for (int64_t i = 0; i < kept; i++) out_s[i] = -sqrtf(out_s[i] < 0 ? -out_s[i] : 0.0f);
    if (rescored) *rescored = done;
    return HS_OK;
}

int hs_rq_scan(const hs_rq_params *p, const uint8_t *codes, const float *factors, int64_t n,
               const float *X, const uint64_t *bits, const float *Q, int64_t nq, int64_t k,
               int bound, double eps0, float *out_scores, int64_t *out_ids, int64_t *rescored) {
    if (!params_ok(p) || n < 0 || nq < 0 || k < 0) return HS_EINVAL;
    const int64_t cs = hs_rq_code_bytes(p->d, p->bits), fs = HS_RQ_NFACT;
    if (bound != HS_RQ_BOUND_HARD && bound != HS_RQ_BOUND_PROB) return HS_EINVAL;
    if (rescored)
        for (int64_t t = 0; t < nq; t++) rescored[t] = 0;
    if (k == 0 || nq == 0) return HS_OK;
    rot r;
    if (rot_init(&r, p->d, p->seed)) return HS_ENOMEM;
    hs_rq_dots_fn dots = hs_rq_dots_impl(p->bits);
    int64_t cap = n > 0 ? n : 1;
    scan_buf b;
    qprep qp = {0};
    b.lo = X ? malloc((size_t)cap * sizeof(double)) : NULL;
    b.id = X ? malloc((size_t)cap * sizeof(int64_t)) : NULL;
    b.kth = malloc((size_t)k * sizeof(double));
    b.S = malloc(CHUNK * sizeof(int32_t));
    b.rows = malloc(CHUNK * sizeof(int64_t));
    b.v = malloc((size_t)r.dp * sizeof(double));
    b.key = malloc(CHUNK * sizeof(double));
    b.err = malloc(CHUNK * sizeof(double));
    int rc = ((b.lo && b.id) || !X) && b.kth && b.S && b.rows && b.v && b.key && b.err ? qprep_alloc(&qp, r.dp)
                                                                      : HS_ENOMEM;
    for (int64_t t = 0; t < nq && rc == HS_OK; t++)
        rc = scan_one(p, &r, dots, codes, cs, factors, fs, n, X, bits, Q + t * p->d, k, bound, eps0, &b,
                      &qp, out_scores + t * k, out_ids + t * k, rescored ? rescored + t : NULL);
    free(b.lo), free(b.id), free(b.kth), free(b.S), free(b.rows), free(b.v), free(qp.pack);
    free(b.key), free(b.err);
    rot_free(&r);
    return rc;
}

/* ------------------------------------------------------------- one row at a time */

/* A context codes each row around the nearest of K centroids c_j, but queries are rotated once,
 * without any centroid: q' = P q (unit q under cosine). Then, by linearity of the estimator,
 *   r <o, P(q - c_j)> ~ r <xbar, P q> / a - r <xbar, P c_j> / a = reo - g,
 * with g (a row constant, exact from the code and P c_j) stored beside the factors, and
 *   l2: ||x - q||^2 = r^2 + ||q - c_j||^2 - 2 (reo - g);  ip / cosine: <x, q> = <c_j, q> + reo.
 * The estimate's error is that of estimating <o, P(q - c_j)> (l2) or <o, P q> (ip), times r: a
 * nearer centroid gives a smaller r and a tighter estimate. Row factors (HS_RQ_CTX_NFACT):
 * [0..3] as hs_rq_encode's, [4] j (exact in a float), [5] g. */
struct hs_rq_ctx {
    hs_rq_params p; /* p.centroid points at centroids below (the first) */
    rot r;
    int64_t cb;
    int K;
    float *centroids; /* K x d */
    double *pc;       /* K x dp: P c_j */
    double *cc;       /* K: ||c_j||^2 */
    hs_rq_dots_fn dots;
};

hs_rq_ctx *hs_rq_ctx_new_multi(const hs_rq_params *p, const float *centroids, int K) {
    if (!params_ok(p) || K < 1 || K > HS_RQ_MAX_CENTROIDS || !centroids) return NULL;
    hs_rq_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    const int64_t d = p->d, dp = hs_rq_dp(d);
    c->centroids = malloc((size_t)(K * d) * sizeof(float));
    c->pc = malloc((size_t)(K * dp) * sizeof(double));
    c->cc = malloc((size_t)K * sizeof(double));
    if (!c->centroids || !c->pc || !c->cc || rot_init(&c->r, d, p->seed)) {
        free(c->centroids), free(c->pc), free(c->cc), free(c);
        return NULL;
    }
    memcpy(c->centroids, centroids, (size_t)(K * d) * sizeof(float));
    for (int j = 0; j < K; j++) {
        double *y = c->pc + j * dp, cc = 0;
        for (int64_t i = 0; i < dp; i++) y[i] = i < d ? centroids[j * d + i] : 0.0;
        for (int64_t i = 0; i < d; i++) cc += y[i] * y[i];
        c->cc[j] = cc;
        rot_apply(&c->r, y);
    }
    c->K = K;
    c->p = *p;
    c->p.centroid = c->centroids;
    c->cb = hs_rq_code_bytes(d, p->bits);
    c->dots = hs_rq_dots_impl(p->bits);
    return c;
}

void hs_rq_ctx_free(hs_rq_ctx *c) {
    if (!c) return;
    rot_free(&c->r);
    free(c->centroids), free(c->pc), free(c->cc);
    free(c);
}

int64_t hs_rq_ctx_nbytes(const hs_rq_ctx *c) {
    if (!c) return 0;
    const int64_t d = c->p.d, dp = c->r.dp;
    return (int64_t)sizeof *c + c->K * (d * (int64_t)sizeof(float) + dp * (int64_t)sizeof(double) + (int64_t)sizeof(double)) +
           HS_RQ_ROUNDS * dp * (1 + (int64_t)sizeof(int32_t)) + dp * (int64_t)sizeof(double);
}

void hs_rq_ctx_encode(const hs_rq_ctx *c, const float *x, uint8_t *code, float *f, double *work) {
    const int64_t d = c->p.d, dp = c->r.dp;
    double *v = work, *tmp = work + dp;
    load_row(x, d, c->p.metric, v);
    int best = 0;
    double bd = INFINITY;
    for (int j = 0; j < c->K && c->K > 1; j++) {
        const float *cj = c->centroids + j * d;
        double s = 0;
        for (int64_t i = 0; i < d; i++) s += (v[i] - cj[i]) * (v[i] - cj[i]);
        if (s < bd) bd = s, best = j;
    }
    hs_rq_params one = c->p;
    one.centroid = c->centroids + best * d;
    encode_row(&one, &c->r, x, code, f, v, tmp);
    /* g = f1 <code - centre, P c_j> (the code centred: 2b - 1, or u - 7.5) */
    const double *pc = c->pc + best * dp;
    double dot = 0;
    if (c->p.bits == 1) {
        for (int64_t i = 0; i < dp; i++) dot += ((code[i >> 3] >> (i & 7)) & 1 ? 1.0 : -1.0) * pc[i];
    } else {
        for (int64_t i = 0; i < dp; i++) dot += (((code[i >> 1] >> ((i & 1) * 4)) & 15) - 7.5) * pc[i];
    }
    f[4] = (float)best;
    f[5] = (float)(f[1] * dot);
}

struct hs_rq_query {
    qprep qp;
    double *v, *tmp;
    int32_t *S;
    int64_t dp;
    double cq[HS_RQ_MAX_CENTROIDS];  /* <c_j, q> */
    double qc2[HS_RQ_MAX_CENTROIDS]; /* ||q - c_j||^2 */
    double qn[HS_RQ_MAX_CENTROIDS];  /* the bounds' ||q'||: ||q - c_j|| (l2) or ||q|| */
};

/* <a, b> in double over 8 independent sums: one sum is a chain of dependent adds (latency-bound,
 * ~10 us for 64 centroids x 128-d per query); eight let the adds overlap and vectorise */
static double dot_fd(const float *a, const double *b, int64_t d) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int t = 0; t < 8; t++) acc[t] += a[i + t] * b[i + t];
    for (; i < d; i++) acc[0] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

hs_rq_query *hs_rq_query_new(int64_t d) {
    int64_t dp = hs_rq_dp(d);
    if (dp <= 0) return NULL;
    hs_rq_query *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->dp = dp;
    q->v = malloc((size_t)dp * sizeof(double));
    q->tmp = malloc((size_t)dp * sizeof(double));
    q->S = malloc(CHUNK * sizeof(int32_t));
    if (!q->v || !q->tmp || !q->S || qprep_alloc(&q->qp, dp)) {
        hs_rq_query_free(q);
        return NULL;
    }
    return q;
}

void hs_rq_query_free(hs_rq_query *q) {
    if (!q) return;
    free(q->v), free(q->tmp), free(q->S), free(q->qp.pack);
    free(q);
}

int hs_rq_query_set(hs_rq_query *q, const hs_rq_ctx *c, const float *x) {
    if (q->dp != c->r.dp) return HS_EINVAL;
    hs_rq_params pq = c->p; /* P q for every metric: no centroid is subtracted */
    if (pq.metric == HS_METRIC_L2) pq.metric = HS_METRIC_IP;
    int rc = qprep_make(&pq, &c->r, x, q->v, q->tmp, &q->qp);
    if (rc) return rc;
    const int64_t d = c->p.d;
    /* q->v holds P q now; the query as scored is x (unit under cosine), in q->tmp as doubles */
    double qs = 0, inv = 1.0, *xs = q->tmp;
    for (int64_t i = 0; i < d; i++) qs += (double)x[i] * x[i];
    if (c->p.metric == HS_METRIC_COSINE && qs > 0) inv = 1.0 / sqrt(qs), qs = 1.0;
    for (int64_t i = 0; i < d; i++) xs[i] = x[i] * inv;
    for (int j = 0; j < c->K; j++) {
        const double dot = dot_fd(c->centroids + j * d, xs, d);
        q->cq[j] = dot;
        q->qc2[j] = qs - 2.0 * dot + c->cc[j];
        if (q->qc2[j] < 0) q->qc2[j] = 0;
        q->qn[j] = c->p.metric == HS_METRIC_L2 ? sqrt(q->qc2[j]) : q->qp.qn;
    }
    return HS_OK;
}

void hs_rq_query_keys(hs_rq_query *q, const hs_rq_ctx *c, const uint8_t *codes, int64_t cs,
                      const float *factors, int64_t fs, const int64_t *rows, int64_t n, double eps0,
                      int bound, float *key, float *err) {
    hs_rq_dots_fn dots = c->dots;
    const int l2 = c->p.metric == HS_METRIC_L2, ip = c->p.metric == HS_METRIC_IP;
    const double kprob = bound == HS_RQ_BOUND_HARD ? 1.0 : eps0 / sqrt((double)(q->dp - 1));
    const qprep *qp = &q->qp;
    /* the float32 key of a rescored row has its own rounding: gamma times its terms (as the scan) */
    const double gamma = (double)(c->p.d + 4) * FLT_EPSILON;
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        dots(codes, c->cb, cs, rows + i0, m, 0, (const uint8_t *)qp->pack, q->S);
        for (int64_t i = 0; i < m; i++) {
            const float *f = factors + rows[i0 + i] * fs;
            const int j = (int)f[4];
            const double r = f[0], reo = f[1] * (qp->ka * f[2] + qp->kb * q->S[i] + qp->kc);
            const double est = l2 ? r * r + q->qc2[j] - 2.0 * (reo - f[5]) : reo + q->cq[j];
            key[i0 + i] = (float)(l2 ? est : -est);
            if (!err) continue;
            const double rot = q->qn[j] * f[3] * kprob, quant = f[1] * qp->qt;
            const double xn = sqrt(c->cc[j]) + r, qq = qp->qsq;
            double e = l2 ? 2.0 * (rot + quant) : rot + quant;
            e += FACT_EPS * (l2 ? r * r + q->qc2[j] + 2.0 * (fabs(reo) + fabs(f[5]) + r * q->qn[j])
                                : fabs(reo) + r * q->qn[j] + fabs(q->cq[j]));
            e += l2 ? 2.0 * gamma * (qq + xn * xn) : ip ? gamma * sqrt(qq) * xn : 3.0 * gamma;
            err[i0 + i] = (float)e;
        }
    }
}

/* Up to K centroids of the rows: k-means (Lloyd, `iters` rounds) over an even sample of at most
 * 65,536 rows (unit length under cosine), started from rows spread evenly through the sample;
 * deterministic. Returns the number of centroids made (<= K; fewer rows than K: one per row). */
int hs_rq_kmeans(int64_t d, int metric, const float *X, const int64_t *rows, int64_t n, int K,
                 int iters, float *out) {
    if (d <= 0 || n < 0 || K < 1) return 0;
    if (n == 0) {
        memset(out, 0, (size_t)d * sizeof(float));
        return 1;
    }
    const int64_t step = n > 65536 ? (n + 65535) / 65536 : 1, m = (n + step - 1) / step;
    if (K > m) K = (int)m;
    float *S = malloc((size_t)(m * d) * sizeof(float));
    double *acc = calloc((size_t)(K * d), sizeof(double));
    int64_t *cnt = calloc((size_t)K, sizeof(int64_t));
    double *v = malloc((size_t)d * sizeof(double));
    if (!S || !acc || !cnt || !v) {
        free(S), free(acc), free(cnt), free(v);
        return -1;
    }
    for (int64_t i = 0; i < m; i++) {
        load_row(X + rows[i * step] * d, d, metric, v);
        for (int64_t t = 0; t < d; t++) S[i * d + t] = (float)v[t];
    }
    for (int j = 0; j < K; j++) memcpy(out + j * d, S + (int64_t)((double)j * m / K) * d, (size_t)d * sizeof(float));
    for (int it = 0; it < iters; it++) {
        memset(acc, 0, (size_t)(K * d) * sizeof(double));
        memset(cnt, 0, (size_t)K * sizeof(int64_t));
        for (int64_t i = 0; i < m; i++) {
            const float *x = S + i * d;
            int best = 0;
            float bd = INFINITY;
            for (int j = 0; j < K; j++) {
                float dd = hs_l2sq(x, out + j * d, d);
                if (dd < bd) bd = dd, best = j;
            }
            cnt[best]++;
            for (int64_t t = 0; t < d; t++) acc[best * d + t] += x[t];
        }
        for (int j = 0; j < K; j++)
            if (cnt[j]) /* an empty cluster keeps its centre */
                for (int64_t t = 0; t < d; t++) out[j * d + t] = (float)(acc[j * d + t] / cnt[j]);
    }
    free(S), free(acc), free(cnt), free(v);
    return K;
}
