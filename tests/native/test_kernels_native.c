/* The distance, exact-search, top-k, bitset and filter kernels of kernels/, in C (no Python),
 * at every SIMD level this CPU has (scalar and AVX2 / AVX-512 on x86-64, scalar and NEON on
 * AArch64), against naive references written here.
 *
 * Most inputs are small integers: every product and partial sum is then an integer below
 * 2^24, exact in float32, so every level must give exactly the reference result whatever
 * its summation order, and a lost, doubled or misplaced element cannot hide in a tolerance.
 * Random float inputs then check the same kernels within a float32 error bound.
 *
 * The batch tokenizer and word map of hs_lexicon.c (no SIMD) are checked once, against a naive
 * split.
 *
 * Built and run by scripts/test-arm.sh (natively, and cross-compiled for AArch64 under
 * qemu-aarch64). Prints one line per level and "ok"; exits 1 at the first failure.
 * Usage: test_kernels_native [seed]
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_bitset.h"
#include "hs_distance.h"
#include "hs_exact.h"
#include "hs_filter.h"
#include "hs_lexicon.h"
#include "hs_topk.h"

static const char *LEVEL_NAMES[] = {"scalar", "avx2", "avx512", "neon"};
#define NLEVELS 4

static int g_level;
static long g_checks;

#define FAIL(...)                                                                  \
    do {                                                                           \
        fprintf(stderr, "FAIL [%s] %s:%d: ", LEVEL_NAMES[g_level], __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                              \
        fprintf(stderr, "\n");                                                     \
        exit(1);                                                                   \
    } while (0)
#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        g_checks++;                                                                \
        if (!(cond)) FAIL(__VA_ARGS__);                                            \
    } while (0)

/* ------------------------------------------------------------- random */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}
static int64_t rint_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }
static float rfloat(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

static void fill_int(float *x, int64_t n, int lim) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)rint_in(-lim, lim);
}
static void fill_float(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = rfloat();
}
/* buffers one float past a 64-byte boundary: the kernels must not assume alignment */
static float *falloc(int64_t n) {
    float *p = (float *)aligned_alloc(64, (size_t)((n + 1 + 15) / 16 * 16) * sizeof(float) + 64);
    if (!p) FAIL("out of memory");
    return p + 1;
}
static void ffree(float *p) { free(p - 1); }

/* ---------------------------------------------------------- references */

static double ref_dot(const float *a, const float *b, int64_t d, double *abs_sum) {
    double s = 0, m = 0;
    for (int64_t j = 0; j < d; j++) {
        s += (double)a[j] * b[j];
        m += fabs((double)a[j] * b[j]);
    }
    if (abs_sum) *abs_sum = m;
    return s;
}
static double ref_l2sq(const float *a, const float *b, int64_t d) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) {
        double t = (double)a[j] - b[j];
        s += t * t;
    }
    return s;
}
static double ref_dot_i8(const float *q, const int8_t *c, int64_t d, double *abs_sum) {
    double s = 0, m = 0;
    for (int64_t j = 0; j < d; j++) {
        s += (double)q[j] * c[j];
        m += fabs((double)q[j] * c[j]);
    }
    if (abs_sum) *abs_sum = m;
    return s;
}
/* float32 error bound of a sum of d terms with |terms| summing to m, in any blocked order */
static double tol_for(int64_t d, double m) { return ((double)d / 4 + 16) * FLT_EPSILON * m + 1e-30; }

/* ------------------------------------------------------------- checks */

static const int64_t SIZES[] = {1,  2,  3,  4,  5,   7,   8,   9,   12,  15,  16,   17,   23,  24,
                                31, 32, 33, 47, 48,  63,  64,  65,  96,  97,  127,  128,  129, 255,
                                256, 257, 384, 511, 768, 1000, 1023, 1024, 1536, 4097, 100003};
#define NSIZES ((int)(sizeof(SIZES) / sizeof(SIZES[0])))

static void check_pair(int64_t d) {
    float *a = falloc(d), *b = falloc(d);
    /* exact: |a|, |b| <= 4 -> |products| <= 16, sums <= 16 * 100003 < 2^24 */
    fill_int(a, d, 4);
    fill_int(b, d, 4);
    double ref = ref_dot(a, b, d, NULL);
    float got = hs_dot(a, b, d);
    CHECK((double)got == ref, "dot d=%lld: %.1f != %.1f", (long long)d, got, ref);
    CHECK(hs_dot_impl()(a, b, d) == got, "hs_dot_impl d=%lld", (long long)d);
    ref = ref_l2sq(a, b, d);
    got = hs_l2sq(a, b, d);
    CHECK((double)got == ref, "l2sq d=%lld: %.1f != %.1f", (long long)d, got, ref);
    CHECK(hs_l2sq_impl()(a, b, d) == got, "hs_l2sq_impl d=%lld", (long long)d);
    /* float inputs, within the float32 bound */
    fill_float(a, d);
    fill_float(b, d);
    double m;
    ref = ref_dot(a, b, d, &m);
    got = hs_dot(a, b, d);
    CHECK(fabs(got - ref) <= tol_for(d, m), "dot(float) d=%lld: %g vs %g", (long long)d, got, ref);
    ref = ref_l2sq(a, b, d);
    got = hs_l2sq(a, b, d);
    CHECK(fabs(got - ref) <= tol_for(d, ref), "l2sq(float) d=%lld: %g vs %g", (long long)d, got, ref);
    ffree(a);
    ffree(b);
}

static void check_dot_i8(int64_t d) {
    float *q = falloc(d);
    int8_t *c = (int8_t *)malloc((size_t)d + 1) + 1; /* odd address */
    for (int64_t j = 0; j < d; j++) c[j] = (int8_t)rint_in(-128, 127);
    /* exact: |q| * 128 * d < 2^24 */
    int lim = (int)((1 << 24) / (128 * d));
    if (lim > 127) lim = 127;
    if (lim < 1) lim = 1;
    fill_int(q, d, lim);
    double ref = ref_dot_i8(q, c, d, NULL);
    float got = hs_dot_i8(q, c, d);
    CHECK((double)got == ref, "dot_i8 d=%lld: %.1f != %.1f", (long long)d, got, ref);
    CHECK(hs_dot_i8_impl()(q, c, d) == got, "hs_dot_i8_impl d=%lld", (long long)d);
    fill_float(q, d);
    double m;
    ref = ref_dot_i8(q, c, d, &m);
    got = hs_dot_i8(q, c, d);
    CHECK(fabs(got - ref) <= tol_for(d, m), "dot_i8(float) d=%lld: %g vs %g", (long long)d, got, ref);
    ffree(q);
    free(c - 1);
}

/* hs_dot_i8_rows over a range and a gathered list (repeats, more rows than the
 * prefetch distance) against the naive product: exact on small integers */
static void check_i8_rows(int64_t d, int64_t n) {
    int64_t nrows = n + 5;
    int8_t *C = (int8_t *)malloc((size_t)(nrows * d) + 1);
    float *q = falloc(d), *out = falloc(n + 1);
    int64_t *rows = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t));
    for (int64_t j = 0; j < nrows * d; j++) C[j] = (int8_t)rint_in(-128, 127);
    int lim = (int)((1 << 24) / (128 * d));
    fill_int(q, d, lim > 127 ? 127 : (lim < 1 ? 1 : lim));
    for (int64_t i = 0; i < n; i++) rows[i] = rint_in(0, nrows - 1);
    int64_t row0 = rint_in(0, 5);
    for (int indexed = 0; indexed < 2; indexed++) {
        out[n] = 12345.0f;
        hs_dot_i8_rows(C, d, indexed ? rows : NULL, n, row0, q, out);
        CHECK(out[n] == 12345.0f, "dot_i8_rows wrote past n=%lld", (long long)n);
        for (int64_t i = 0; i < n; i++) {
            double ref = ref_dot_i8(q, C + (indexed ? rows[i] : row0 + i) * d, d, NULL);
            CHECK((double)out[i] == ref, "dot_i8_rows d=%lld n=%lld row %lld (%s): %.1f != %.1f",
                  (long long)d, (long long)n, (long long)i, indexed ? "indexed" : "range", out[i], ref);
        }
    }
    free(C);
    ffree(q);
    ffree(out);
    free(rows);
}

static void check_rows(int64_t d, int64_t n) {
    int64_t nrows = n + 5;
    float *X = falloc(nrows * d), *q = falloc(d), *out = falloc(n + 1);
    int64_t *rows = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t));
    fill_int(X, nrows * d, 3);
    fill_int(q, d, 3);
    for (int64_t i = 0; i < n; i++) rows[i] = rint_in(0, nrows - 1); /* repeats allowed */
    int64_t row0 = rint_in(0, 5);
    for (int pass = 0; pass < 4; pass++) {
        int l2 = pass & 1, indexed = pass >> 1;
        out[n] = 12345.0f; /* guard: nothing written past n */
        if (l2) hs_l2sq_rows(X, d, indexed ? rows : NULL, n, row0, q, out);
        else hs_dot_rows(X, d, indexed ? rows : NULL, n, row0, q, out);
        CHECK(out[n] == 12345.0f, "%s_rows wrote past n=%lld", l2 ? "l2sq" : "dot", (long long)n);
        for (int64_t i = 0; i < n; i++) {
            const float *x = X + (indexed ? rows[i] : row0 + i) * d;
            double ref = l2 ? ref_l2sq(x, q, d) : ref_dot(x, q, d, NULL);
            CHECK((double)out[i] == ref, "%s_rows d=%lld n=%lld row %lld (%s): %.1f != %.1f",
                  l2 ? "l2sq" : "dot", (long long)d, (long long)n, (long long)i,
                  indexed ? "indexed" : "range", out[i], ref);
        }
    }
    /* float data, within the bound */
    fill_float(X, nrows * d);
    fill_float(q, d);
    hs_dot_rows(X, d, NULL, n, 0, q, out);
    for (int64_t i = 0; i < n; i++) {
        double m, ref = ref_dot(X + i * d, q, d, &m);
        CHECK(fabs(out[i] - ref) <= tol_for(d, m), "dot_rows(float) d=%lld row %lld", (long long)d, (long long)i);
    }
    hs_l2sq_rows(X, d, rows, n, 0, q, out);
    for (int64_t i = 0; i < n; i++) {
        double ref = ref_l2sq(X + rows[i] * d, q, d);
        CHECK(fabs(out[i] - ref) <= tol_for(d, ref), "l2sq_rows(float) d=%lld row %lld", (long long)d, (long long)i);
    }
    ffree(X);
    ffree(q);
    ffree(out);
    free(rows);
}

static void check_tile(int64_t d) {
    int64_t ldx = HS_TILE_R + 8 * rint_in(0, 28); /* 32 .. 256, like exact.c's BLOCK_ROWS */
    float *XT = falloc(d * ldx), *QP = falloc(HS_TILE_Q * d);
    float mul[HS_TILE_R], add[HS_TILE_R], thr[HS_TILE_Q], out[HS_TILE_Q * HS_TILE_R];
    double ref[HS_TILE_Q * HS_TILE_R];
    uint32_t masks[HS_TILE_Q];
    fill_int(XT, d * ldx, 3);
    fill_int(QP, HS_TILE_Q * d, 3);
    for (int t = 0; t < HS_TILE_R; t++) {
        mul[t] = (float)rint_in(-2, 2);
        add[t] = (float)rint_in(-50, 50);
    }
    mul[3] = 0.0f;
    add[3] = -INFINITY; /* a padding row of exact.c: never above a threshold */
    add[17] = NAN;      /* NaN compares false at every level */
    for (int i = 0; i < HS_TILE_Q; i++)
        for (int t = 0; t < HS_TILE_R; t++) {
            double s = 0;
            for (int64_t j = 0; j < d; j++) s += (double)QP[i * d + j] * XT[j * ldx + t];
            ref[i * HS_TILE_R + t] = s * mul[t] + add[t];
        }
    for (int i = 0; i < HS_TILE_Q; i++) {
        int pick = (int)rint_in(0, HS_TILE_R - 1);
        /* thresholds equal to a score (>= must hold), -inf (all but NaN), +inf (none) */
        thr[i] = i == 0 ? -INFINITY : i == 1 ? INFINITY : (float)ref[i * HS_TILE_R + (pick == 17 ? 0 : pick)];
    }
    memset(out, 0, sizeof(out));
    hs_score_tile(XT, ldx, d, QP, mul, add, thr, out, masks);
    for (int i = 0; i < HS_TILE_Q; i++) {
        uint32_t want = 0;
        for (int t = 0; t < HS_TILE_R; t++) {
            double r = ref[i * HS_TILE_R + t];
            float o = out[i * HS_TILE_R + t];
            if (isnan(r)) CHECK(isnan(o), "tile d=%lld q%d row %d: %g is not NaN", (long long)d, i, t, o);
            else CHECK((double)o == r, "tile d=%lld q%d row %d: %g != %g", (long long)d, i, t, o, r);
            want |= (uint32_t)(r >= thr[i]) << t;
        }
        CHECK(masks[i] == want, "tile d=%lld q%d mask %08x != %08x", (long long)d, i, masks[i], want);
    }
    /* float data: scores within the bound, and each mask bit agrees with the score written */
    fill_float(XT, d * ldx);
    fill_float(QP, HS_TILE_Q * d);
    for (int t = 0; t < HS_TILE_R; t++) {
        mul[t] = rfloat();
        add[t] = rfloat();
    }
    for (int i = 0; i < HS_TILE_Q; i++) thr[i] = rfloat() * 0.1f;
    hs_score_tile(XT, ldx, d, QP, mul, add, thr, out, masks);
    for (int i = 0; i < HS_TILE_Q; i++)
        for (int t = 0; t < HS_TILE_R; t++) {
            double s = 0, m = 0;
            for (int64_t j = 0; j < d; j++) {
                s += (double)QP[i * d + j] * XT[j * ldx + t];
                m += fabs((double)QP[i * d + j] * XT[j * ldx + t]);
            }
            double r = s * mul[t] + add[t];
            float o = out[i * HS_TILE_R + t];
            CHECK(fabs(o - r) <= tol_for(d, m) * fabs(mul[t]) + 4 * FLT_EPSILON * (fabs(r) + fabs(add[t])),
                  "tile(float) d=%lld q%d row %d: %g vs %g", (long long)d, i, t, o, r);
            CHECK(((masks[i] >> t) & 1u) == (uint32_t)(o >= thr[i]), "tile(float) d=%lld q%d mask bit %d",
                  (long long)d, i, t);
        }
    ffree(XT);
    ffree(QP);
}

static void check_stream_sum(int64_t n) {
    float *x = falloc(n);
    fill_int(x, n, 8); /* |partial sums| <= 8 n < 2^24 */
    double ref = 0;
    for (int64_t i = 0; i < n; i++) ref += x[i];
    double got = hs_stream_sum(x, n);
    CHECK(got == ref, "stream_sum n=%lld: %.1f != %.1f", (long long)n, got, ref);
    ffree(x);
}

/* exact top-k of nq queries against naive scores: ordered, unique, from the filter, and the
 * kept scores are the true k best (ties at the boundary within the float32 bound). */
static void check_exact(int64_t n, int64_t d, int64_t nq, int metric, int filtered, int64_t k) {
    float *X = falloc(n * d), *Q = falloc(nq * d), *aux = falloc(n);
    float *scores = falloc(nq * k);
    int64_t *ids = (int64_t *)malloc((size_t)(nq * k) * sizeof(int64_t));
    double *ref = (double *)malloc((size_t)n * sizeof(double));
    uint64_t *bits = (uint64_t *)calloc((size_t)HS_WORDS(n) + 1, 8);
    char *seen = (char *)calloc((size_t)n, 1);
    fill_float(X, n * d);
    fill_float(Q, nq * d);
    if (n > 2) memset(X + 2 * d, 0, (size_t)d * sizeof(float)); /* a zero row: cosine 0 */
    for (int64_t r = 0; r < n; r++) {
        double sq = ref_dot(X + r * d, X + r * d, d, NULL);
        aux[r] = metric == HS_METRIC_L2 ? (float)sq : (sq > 0 ? (float)(1.0 / sqrt(sq)) : 0.0f);
        if (!filtered || rnd() % 3 == 0) bits[r / 64] |= 1ull << (r % 64);
    }
    int64_t cand = filtered ? hs_bitset_popcount(bits, HS_WORDS(n)) : n;
    int rc = hs_exact_search(X, n, d, aux, Q, nq, metric, filtered ? bits : NULL, k, scores, ids);
    CHECK(rc == HS_OK, "exact_search rc=%d", rc);
    for (int64_t qi = 0; qi < nq; qi++) {
        const float *q = Q + qi * d;
        double qn = sqrt(ref_dot(q, q, d, NULL)), bound = 0;
        for (int64_t r = 0; r < n; r++) {
            double m, dot = ref_dot(X + r * d, q, d, &m);
            if (metric == HS_METRIC_IP) ref[r] = dot;
            else if (metric == HS_METRIC_COSINE) ref[r] = aux[r] > 0 && qn > 0 ? dot * aux[r] / qn : 0;
            else ref[r] = -sqrt(ref_l2sq(X + r * d, q, d));
            double t = tol_for(d, m + ref_dot(X + r * d, X + r * d, d, NULL) + qn * qn) * 4 + 1e-5;
            if (t > bound) bound = t;
        }
        int64_t want = cand < k ? cand : k;
        memset(seen, 0, (size_t)n);
        const float *s = scores + qi * k;
        const int64_t *id = ids + qi * k;
        for (int64_t i = 0; i < k; i++) {
            if (i >= want) {
                CHECK(id[i] == -1 && isinf(s[i]) && s[i] < 0, "exact: slot %lld not padded", (long long)i);
                continue;
            }
            CHECK(id[i] >= 0 && id[i] < n, "exact: id %lld out of range", (long long)id[i]);
            CHECK(!seen[id[i]], "exact: id %lld twice", (long long)id[i]);
            seen[id[i]] = 1;
            CHECK(!filtered || hs_bit(bits, id[i]), "exact: id %lld not in the filter", (long long)id[i]);
            CHECK(fabs(s[i] - ref[id[i]]) <= bound, "exact metric %d: id %lld score %g vs %g", metric,
                  (long long)id[i], s[i], ref[id[i]]);
            if (i > 0) CHECK(s[i] <= s[i - 1], "exact: scores not best-first");
        }
        /* nothing left out beats the k-th kept score */
        double kth = want ? s[want - 1] : INFINITY;
        for (int64_t r = 0; r < n; r++)
            if (!seen[r] && (!filtered || hs_bit(bits, r)))
                CHECK(ref[r] <= kth + bound, "exact metric %d nq=%lld: row %lld (%g) beats the k-th (%g)",
                      metric, (long long)nq, (long long)r, ref[r], kth);
    }
    ffree(X);
    ffree(Q);
    ffree(aux);
    ffree(scores);
    free(ids);
    free(ref);
    free(bits);
    free(seen);
}

static void check_topk(int64_t n, int64_t k) {
    float *s = falloc(n + 1), *os = falloc(k + 1);
    int64_t *oi = (int64_t *)malloc((size_t)(k + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) s[i] = (float)rint_in(-20, 20); /* many ties */
    int64_t kept = hs_topk_f32(s, n, k, os, oi);
    CHECK(kept == (n < k ? n : k), "topk kept %lld", (long long)kept);
    /* the reference: selection by (score desc, index asc) */
    char *used = (char *)calloc((size_t)n + 1, 1);
    for (int64_t i = 0; i < kept; i++) {
        int64_t best = -1;
        for (int64_t j = 0; j < n; j++)
            if (!used[j] && (best < 0 || s[j] > s[best])) best = j;
        used[best] = 1;
        CHECK(oi[i] == best && os[i] == s[best], "topk n=%lld k=%lld slot %lld: %lld != %lld", (long long)n,
              (long long)k, (long long)i, (long long)oi[i], (long long)best);
    }
    for (int64_t i = kept; i < k; i++) CHECK(oi[i] == -1, "topk padding");
    free(used);
    ffree(s);
    ffree(os);
    free(oi);
}

static void check_bitset(int64_t n) {
    int64_t nw = HS_WORDS(n);
    uint64_t *b = (uint64_t *)calloc((size_t)nw + 1, 8);
    int64_t *idx = (int64_t *)malloc((size_t)(n + 1) * sizeof(int64_t)), cnt = 0;
    int density = (int)rint_in(1, 4);
    for (int64_t i = 0; i < n; i++)
        if (rnd() % 4 < (uint64_t)density) b[i / 64] |= 1ull << (i % 64);
    hs_bitset_clear_tail(b, n);
    for (int64_t i = 0; i < n; i++) cnt += hs_bit(b, i);
    CHECK(hs_bitset_popcount(b, nw) == cnt, "popcount n=%lld", (long long)n);
    int64_t limit = rint_in(0, cnt + 2);
    int64_t got = hs_bitset_to_indices(b, nw, limit, idx), j = 0;
    CHECK(got == (limit < cnt ? limit : cnt), "to_indices count");
    for (int64_t i = 0; i < n && j < got; i++)
        if (hs_bit(b, i)) CHECK(idx[j++] == i, "to_indices position %lld", (long long)j - 1);
    free(b);
    free(idx);
}

/* int64 / float64 compare leaves (AVX-512 and NEON paths over whole 64-row words) */
static void check_filter(int64_t n) {
    int64_t nw = HS_WORDS(n);
    int64_t *ci = (int64_t *)malloc((size_t)n * 8);
    double *cf = (double *)malloc((size_t)n * 8);
    uint8_t *present = (uint8_t *)malloc((size_t)n);
    uint64_t *out = (uint64_t *)calloc((size_t)nw + 1, 8);
    for (int64_t i = 0; i < n; i++) {
        ci[i] = rint_in(-3, 3);
        if (rnd() % 7 == 0) ci[i] = (rnd() & 1) ? INT64_MAX : INT64_MIN;
        cf[i] = (double)rint_in(-3, 3) * 0.5;
        if (rnd() % 9 == 0) cf[i] = NAN;
        if (rnd() % 11 == 0) cf[i] = (rnd() & 1) ? INFINITY : -INFINITY;
        present[i] = rnd() % 5 != 0;
    }
    const double fvals[] = {0.5, -1.0, NAN, INFINITY};
    for (int cmp = HS_CMP_EQ; cmp <= HS_CMP_GE; cmp++) {
        for (int v = 0; v < 5; v++) {
            for (int pres = 0; pres < 2; pres++) {
                int is_f = v < 4;
                hs_filter_instr ins;
                memset(&ins, 0, sizeof(ins));
                ins.op = is_f ? HS_F_F64 : HS_F_I64;
                ins.cmp = cmp;
                ins.col = is_f ? (const void *)cf : (const void *)ci;
                ins.present = pres ? present : NULL;
                ins.fval = is_f ? fvals[v] : 0;
                ins.ival = 1;
                int rc = hs_filter_eval(&ins, 1, n, NULL, out);
                CHECK(rc == HS_OK, "filter rc=%d", rc);
                for (int64_t i = 0; i < n; i++) {
                    int want;
                    if (is_f) {
                        double a = cf[i], b = fvals[v];
                        want = cmp == HS_CMP_EQ ? a == b : cmp == HS_CMP_NE ? a != b : cmp == HS_CMP_LT ? a < b
                             : cmp == HS_CMP_LE ? a <= b : cmp == HS_CMP_GT ? a > b : a >= b;
                    } else {
                        int64_t a = ci[i], b = 1;
                        want = cmp == HS_CMP_EQ ? a == b : cmp == HS_CMP_NE ? a != b : cmp == HS_CMP_LT ? a < b
                             : cmp == HS_CMP_LE ? a <= b : cmp == HS_CMP_GT ? a > b : a >= b;
                    }
                    if (pres && !present[i]) want = 0;
                    CHECK(hs_bit(out, i) == want, "filter %s cmp %d value %d n=%lld row %lld", is_f ? "f64" : "i64",
                          cmp, v, (long long)n, (long long)i);
                }
                if (n % 64) CHECK((out[nw - 1] >> (n % 64)) == 0, "filter: bits set past n");
            }
        }
    }
    free(ci);
    free(cf);
    free(present);
    free(out);
}

static void run_level(void) {
    for (int i = 0; i < NSIZES; i++) {
        check_pair(SIZES[i]);
        if (SIZES[i] <= 20000) check_dot_i8(SIZES[i]);
    }
    check_dot_i8(20000);
    for (int it = 0; it < 150; it++) {
        int64_t d = rint_in(1, 300);
        check_pair(d);
        check_dot_i8(d);
    }
    for (int i = 0; i < NSIZES; i++)
        if (SIZES[i] <= 1024) check_rows(SIZES[i], rint_in(0, 11));
    for (int it = 0; it < 60; it++) {
        /* drawn one by one: argument order is unspecified, and a seed must give the same
         * inputs on every architecture */
        int64_t d = rint_in(1, 200), n = rint_in(0, 13);
        check_rows(d, n);
    }
    for (int it = 0; it < 40; it++) {
        int64_t d = rint_in(1, 300), n = rint_in(0, 40);
        check_i8_rows(d, n);
    }
    for (int i = 0; i < NSIZES; i++)
        if (SIZES[i] <= 1024) check_tile(SIZES[i]);
    for (int it = 0; it < 30; it++) check_tile(rint_in(1, 150));
    for (int i = 0; i < NSIZES; i++) check_stream_sum(SIZES[i]);
    check_stream_sum(1 << 20);
    for (int metric = 0; metric < 3; metric++)
        for (int filtered = 0; filtered < 2; filtered++) {
            /* 1 query: the rows path; 3: below, 9: above the batched (tiled) path's threshold */
            check_exact(300, 1, 9, metric, filtered, 5);
            check_exact(700, 17, 1, metric, filtered, 10);
            check_exact(700, 17, 9, metric, filtered, 10);
            check_exact(260, 64, 3, metric, filtered, 7);
            check_exact(500, 100, 12, metric, filtered, 20);
            check_exact(40, 5, 8, metric, filtered, 100); /* k larger than the rows */
        }
    for (int it = 0; it < 40; it++) {
        int64_t n = rint_in(0, 200), k = rint_in(1, 30);
        check_topk(n, k);
    }
    for (int it = 0; it < 40; it++) check_bitset(rint_in(0, 700));
    const int64_t fn[] = {1, 63, 64, 65, 128, 200, 1000};
    for (int i = 0; i < 7; i++) check_filter(fn[i]);
}

/* ------------------------------------------------------------- lexicon */

static int lex_word_byte(int c, int presplit) {
    if (presplit) return c != ' ';
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Random batches of ASCII and presplit texts, tokenised, their new words given ids, then every
 * token's id compared with the id the map holds for the naively split (and lowercased) word. */
static void check_lexicon(void) {
    static const char ALPHA[] = "abAB09 ,.-_zZxyq\t";
    enum { MAXN = 20, MAXLEN = 300 };
    static uint8_t buf[MAXN * MAXLEN];
    hs_lex *lx = hs_lex_new();
    CHECK(lx != NULL, "hs_lex_new");
    for (int it = 0; it < 2000; it++) {
        int64_t n = rint_in(0, MAXN), offs[MAXN + 1], len = 0;
        uint8_t pre[MAXN];
        offs[0] = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t m = rint_in(0, MAXLEN - 1);
            for (int64_t j = 0; j < m; j++) buf[len++] = (uint8_t)ALPHA[rint_in(0, (int64_t)sizeof ALPHA - 2)];
            offs[i + 1] = len;
            pre[i] = (uint8_t)rint_in(0, 1);
        }
        hs_lex_batch b;
        memset(&b, 0, sizeof b);
        CHECK(hs_lex_tokenize(lx, buf, offs, pre, n, 1, &b) == HS_OK, "hs_lex_tokenize");
        int32_t *ids = malloc((size_t)(b.nnew + 1) * sizeof(int32_t));
        for (int64_t j = 0; j < b.nnew; j++) ids[j] = (int32_t)(hs_lex_size(lx) + j);
        CHECK(hs_lex_resolve(lx, &b, ids) == HS_OK, "hs_lex_resolve");
        int64_t t = 0;
        for (int64_t i = 0; i < n; i++) {
            CHECK(b.doc_offs[i] == t, "lexicon: text %lld starts at token %lld", (long long)i, (long long)t);
            for (int64_t p = offs[i]; p < offs[i + 1];) {
                if (!lex_word_byte(buf[p], pre[i])) {
                    p++;
                    continue;
                }
                uint8_t w[MAXLEN];
                int64_t k = 0;
                for (; p < offs[i + 1] && lex_word_byte(buf[p], pre[i]); p++)
                    w[k++] = (uint8_t)(!pre[i] && buf[p] >= 'A' && buf[p] <= 'Z' ? buf[p] + 32 : buf[p]);
                CHECK(t < b.ntok && hs_lex_get(lx, w, k) == b.tids[t], "lexicon: token %lld of batch %d",
                      (long long)t, it);
                t++;
            }
        }
        CHECK(t == b.ntok, "lexicon: %lld tokens, expected %lld", (long long)b.ntok, (long long)t);
        free(ids);
        hs_lex_batch_free(&b);
    }
    /* a byte >= 0x80 in a text not sent presplit is refused, and leaves the map alone */
    const uint8_t high[] = {'c', 'a', 'f', 0xC3, 0xA9};
    int64_t hoffs[2] = {0, 5}, before = hs_lex_size(lx);
    uint8_t zero = 0;
    hs_lex_batch b;
    memset(&b, 0, sizeof b);
    CHECK(hs_lex_tokenize(lx, high, hoffs, &zero, 1, 1, &b) == HS_EINVAL, "lexicon: non-ASCII accepted");
    hs_lex_batch_free(&b);
    CHECK(hs_lex_size(lx) == before, "lexicon: a refused batch changed the map");
    hs_lex_free(lx);
}

int main(int argc, char **argv) {
    if (argc > 1) g_rng = strtoull(argv[1], NULL, 0) | 1;
    uint64_t seed = g_rng;
    int best = hs_simd_level();
#if defined(__aarch64__)
    const char *arch = "aarch64";
    if (best != HS_SIMD_NEON) { g_level = best; FAIL("AArch64 did not start at NEON"); }
#elif defined(__x86_64__) || defined(__i386__)
    const char *arch = "x86";
    if (hs_simd_available(HS_SIMD_NEON)) { g_level = best; FAIL("NEON claimed on x86"); }
#else
    const char *arch = "other";
#endif
    printf("arch %s, best level %s, seed 0x%llx\n", arch, LEVEL_NAMES[best], (unsigned long long)seed);
    int ran = 0;
    for (int level = 0; level < NLEVELS; level++) {
        g_level = level;
        int got = hs_simd_force(level);
        if (!hs_simd_available(level)) {
            /* a level the CPU lacks falls back to the best one it has */
            CHECK(got == best && hs_simd_level() == best, "forcing missing %s gave %s", LEVEL_NAMES[level],
                  LEVEL_NAMES[got]);
            printf("  %-7s not on this CPU (falls back to %s)\n", LEVEL_NAMES[level], LEVEL_NAMES[got]);
            continue;
        }
        CHECK(got == level && hs_simd_level() == level, "forcing %s gave %s", LEVEL_NAMES[level], LEVEL_NAMES[got]);
        long before = g_checks;
        g_rng = seed; /* the same inputs at every level */
        run_level();
        printf("  %-7s %ld checks passed\n", LEVEL_NAMES[level], g_checks - before);
        ran++;
    }
    hs_simd_force(best);
    long before_lex = g_checks;
    g_rng = seed;
    check_lexicon();
    printf("  lexicon (hs_lexicon.c, no SIMD): %ld checks\n", g_checks - before_lex);
    printf("ok: %d levels\n", ran);
    return 0;
}
