/* RaBitQ-style codes of float32 vectors: 1 bit or 4 bits per (rotated) dimension, an
 * unbiased estimate of distances / inner products from the code, an error bound on that
 * estimate, and an exact top-k scan that ranks on the codes and rescores on float32 rows
 * only where a bound leaves a row in doubt.
 *
 * Per collection: a centroid c (float32, d values) and a rotation P fixed by (seed, d).
 * Vectors are zero-padded to dp = d rounded up to a multiple of 64 and rotated there.
 * P is HS_RQ_ROUNDS rounds of: random sign flips, a random permutation, and a normalised
 * fast Walsh-Hadamard transform on each block of `blk` coordinates, blk the largest power
 * of two dividing dp (so 128 for dp = 128 or 384, 64 for dp = 320). Each step is
 * orthogonal, so P is; the signs and permutations come from splitmix64 seeded by
 * (seed, dp) alone, so the same (seed, d) gives the same P on any machine. The transform
 * costs O(dp log blk) per vector instead of the dp^2 of a dense random matrix.
 *
 * Per vector x: r = ||x - c|| and o = P(x - c) / r (a unit vector; for r = 0 the code
 * of the all-ones direction, whose distance estimate is exact because r multiplies it).
 *   bits = 1: the sign bits b of o; xbar = (2b - 1) / sqrt(dp).
 *   bits = 4: u_i in [0, 15], o_i ~ t (u_i - 7.5) with the per-vector scale t that
 *             maximises cos(xbar, o) over a small grid; xbar = (u - 7.5) / ||u - 7.5||.
 * Stored per vector: the code (dp/8 or dp/2 bytes) and HS_RQ_NFACT float factors:
 *   [0] r, [1] a = <xbar, o> (> 0), [2] popcount(b) or sum(u), [3] 1/||2b-1|| or 1/||u-7.5||.
 *
 * Query q (unit length first under cosine): q' = P(q - c) for l2, q' = P q for ip and
 * cosine (so <x, q> = <c, q> + r <o, q'>). <o, q'> ~ <xbar, q'> / a (unbiased over the
 * random rotation). q' is quantised to 8-bit unsigned levels lo + delta * u (|error| <=
 * delta / 2 per coordinate), so the code product is an exact integer sum; that error adds
 * sqrt(dp) * delta / (2a) to both bounds. Bounds on |<o, q'> - estimate|:
 *   hard  ||q'|| sqrt(1/a^2 - 1)                         (Cauchy-Schwarz, always holds)
 *   prob  ||q'|| eps0 sqrt((1 - a^2) / a^2) / sqrt(dp - 1) (RaBitQ, holds w.h.p.)
 * l2: ||x - q||^2 = r^2 + ||q - c||^2 - 2 r <o, q'> (bound 2 r B); ip / cosine:
 * <x, q> = r <o, q'> + <c, q> (bound r B); both widened by a float32-rounding slack.
 */
#ifndef HS_RABITQ_H
#define HS_RABITQ_H

#include "hs_common.h"

#define HS_RQ_ROUNDS 4
#define HS_RQ_NFACT 4
#define HS_RQ_BOUND_PROB 0
#define HS_RQ_BOUND_HARD 1

/* A collection's code parameters. centroid holds d floats (unit length is not required). */
typedef struct {
    int64_t d;
    int bits;    /* 1 or 4 */
    int metric;  /* HS_METRIC_* */
    uint64_t seed;
    const float *centroid;
} hs_rq_params;

/* Padded dimension and code bytes per vector (0 when d or bits is invalid). */
int64_t hs_rq_dp(int64_t d);
int64_t hs_rq_code_bytes(int64_t d, int bits);

/* out (n x dp, float64) = P applied to the n rows of X (n x d, zero-padded to dp). */
int hs_rq_rotate(int64_t d, uint64_t seed, const float *X, int64_t n, double *out);

/* Codes (n x code_bytes) and factors (n x HS_RQ_NFACT) of the n rows of X (n x d).
 * Rows are normalised first under cosine (a zero row stays zero). */
int hs_rq_encode(const hs_rq_params *p, const float *X, int64_t n, uint8_t *codes,
                 float *factors);

/* Estimates for nq queries against n coded vectors (rows[i], or row i when rows is NULL):
 * est is the squared euclidean distance (l2) or the inner product (ip; cosine similarity
 * under cosine); bprob / bhard (either may be NULL) the half-widths of the intervals that
 * hold the true value (bprob with eps0). All outputs nq x n. */
int hs_rq_estimate(const hs_rq_params *p, const uint8_t *codes, const float *factors,
                   const int64_t *rows, int64_t n, const float *Q, int64_t nq, double eps0,
                   float *est, float *bprob, float *bhard);

/* Top-k of nq queries over the coded vectors [0, n) (bits: allowed ones, NULL = all).
 * X (n x d float32, row = slot) non-NULL: exact scan, rows whose bound (HS_RQ_BOUND_HARD or
 * _PROB with eps0) lets them beat the k-th best upper end are rescored on X; with the hard
 * bound the answer is the float32 top-k. X NULL: the top-k by the estimate alone.
 * Scores as hs_exact_search (cosine, inner product or -euclidean), best first, ties to the
 * lower row, padded with -inf / -1. rescored (optional, nq values): rows rescored. */
int hs_rq_scan(const hs_rq_params *p, const uint8_t *codes, const float *factors, int64_t n,
               const float *X, const uint64_t *bits, const float *Q, int64_t nq, int64_t k,
               int bound, double eps0, float *out_scores, int64_t *out_ids, int64_t *rescored);

/* A collection's codes prepared once (the centroids copied, the rotation drawn), for callers
 * that code or score a few rows at a time, such as the HNSW walk. Each row is coded around the
 * nearest of K centroids and carries HS_RQ_CTX_NFACT factors: hs_rq_encode's four, the
 * centroid's number and a correction term (see hs_rabitq.c). A context is read-only once made:
 * any number of threads may use it, each with its own work buffers and query. */
#define HS_RQ_CTX_NFACT 6
#define HS_RQ_MAX_CENTROIDS 256
typedef struct hs_rq_ctx hs_rq_ctx;
/* centroids: K x d (1 <= K <= HS_RQ_MAX_CENTROIDS); p->centroid is not read. NULL: bad
 * parameters or out of memory. */
hs_rq_ctx *hs_rq_ctx_new_multi(const hs_rq_params *p, const float *centroids, int K);
void hs_rq_ctx_free(hs_rq_ctx *c);
/* bytes the context holds (centroids, their rotations, the rotation's tables) */
int64_t hs_rq_ctx_nbytes(const hs_rq_ctx *c);
/* The code (code_bytes) and factors (HS_RQ_CTX_NFACT) of one row of d floats; work holds
 * 2 * hs_rq_dp(d) doubles. */
void hs_rq_ctx_encode(const hs_rq_ctx *c, const float *x, uint8_t *code, float *f, double *work);

/* One query prepared against a context (rotated and quantised): one per thread. */
typedef struct hs_rq_query hs_rq_query;
hs_rq_query *hs_rq_query_new(int64_t d);
void hs_rq_query_free(hs_rq_query *q);
/* HS_EINVAL for a query that is not finite (or a context of another dimension). */
int hs_rq_query_set(hs_rq_query *q, const hs_rq_ctx *c, const float *x);
/* Keys of n rows rows[i] coded by the context, whose code is cs bytes apart from codes and whose
 * factors are fs floats apart from factors (codes and factors may interleave in one row): lower
 * is nearer - the estimated squared distance (l2) or minus the estimated inner product / cosine
 * similarity - and, when err is not NULL, the half-width around it of the bound (HS_RQ_BOUND_PROB
 * at eps0, or HS_RQ_BOUND_HARD) that holds the float32 key of the row (its rounding included). */
void hs_rq_query_keys(hs_rq_query *q, const hs_rq_ctx *c, const uint8_t *codes, int64_t cs,
                      const float *factors, int64_t fs, const int64_t *rows, int64_t n, double eps0,
                      int bound, float *key, float *err);
/* Up to K k-means centroids (K x d into out) of the rows `rows` of X, unit length under cosine:
 * an even sample of at most 65,536 rows, `iters` Lloyd rounds, deterministic. Returns how many
 * were made (fewer when there are fewer rows; 1 zero centroid for n = 0), -1 out of memory. */
int hs_rq_kmeans(int64_t d, int metric, const float *X, const int64_t *rows, int64_t n, int K,
                 int iters, float *out);

#endif
