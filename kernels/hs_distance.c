/* Distance kernels: scalar, AVX2+FMA, AVX-512 (x86-64) and NEON (AArch64)
 * variants, dispatched once. */
#include "hs_distance.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HS_X86 1
#else
#define HS_X86 0
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define HS_NEON 1
#else
#define HS_NEON 0
#endif

/* ---------------------------------------------------------------- scalar */

static float dot_scalar(const float *a, const float *b, int64_t d) {
    /* eight partial sums: without -ffast-math the compiler may not reorder a
     * sum, but it packs independent sums into SSE/NEON lanes (two registers,
     * two chains), which keeps a scan near the memory bandwidth */
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= d; j += 8)
        for (int t = 0; t < 8; t++) s[t] += a[j + t] * b[j + t];
    for (; j < d; j++) s[0] += a[j] * b[j];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static float l2sq_scalar(const float *a, const float *b, int64_t d) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= d; j += 8)
        for (int t = 0; t < 8; t++) {
            float u = a[j + t] - b[j + t];
            s[t] += u * u;
        }
    for (; j < d; j++) {
        float u = a[j] - b[j];
        s[0] += u * u;
    }
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static float dot_i8_scalar(const float *q, const int8_t *c, int64_t d) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= d; j += 8)
        for (int t = 0; t < 8; t++) s[t] += q[j + t] * (float)c[j + t];
    for (; j < d; j++) s[0] += q[j] * (float)c[j];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* Row scores one row at a time: the pair kernels already keep several FMA chains
 * in flight, so a row costs its bytes and no horizontal sum is shared. A
 * contiguous range streams (the hardware prefetcher follows it); the rows of a
 * gathered list are prefetched HS_PF_ROWS ahead, which no prefetcher can guess.
 * ATTR carries the level's target attribute so SINGLE inlines into the loop. */
#define HS_PF_ROWS 8
static inline void prefetch_bytes(const void *x, int64_t bytes) {
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)x + o, 0, 3);
}
#define HS_ROWS_T(NAME, ATTR, T, CALL, F)                                           \
    ATTR static void NAME(const T *X, int64_t d, const int64_t *rows, int64_t n,    \
                          int64_t row0, const float *q, float *out) {              \
        if (!rows) {                                                               \
            const T *x = X + row0 * d;                                             \
            for (int64_t i = 0; i < n; i++) out[i] = CALL(F, x + i * d);           \
            return;                                                                \
        }                                                                          \
        for (int64_t i = 0; i < n; i++) {                                          \
            if (i + HS_PF_ROWS < n)                                                \
                prefetch_bytes(X + rows[i + HS_PF_ROWS] * d, d * (int64_t)sizeof(T)); \
            out[i] = CALL(F, X + rows[i] * d);                                     \
        }                                                                          \
    }
#define HS_CALL_XQ(F, x) F(x, q, d)
#define HS_CALL_QX(F, x) F(q, x, d)
#define HS_ROWS(NAME, ATTR, SINGLE) HS_ROWS_T(NAME, ATTR, float, HS_CALL_XQ, SINGLE)
#define HS_ROWS_I8(NAME, ATTR, SINGLE) HS_ROWS_T(NAME, ATTR, int8_t, HS_CALL_QX, SINGLE)
HS_ROWS(dot_rows_scalar, , dot_scalar)
HS_ROWS(l2sq_rows_scalar, , l2sq_scalar)
HS_ROWS_I8(dot_i8_rows_scalar, , dot_i8_scalar)

static void tile_scalar(const float *XT, int64_t ldx, int64_t d, const float *QP,
                        const float *mul, const float *add, const float *thr,
                        float *out, uint32_t *masks) {
    for (int i = 0; i < HS_TILE_Q * HS_TILE_R; i++) out[i] = 0.0f;
    for (int64_t j = 0; j < d; j++) {
        const float *xr = XT + j * ldx;
        for (int i = 0; i < HS_TILE_Q; i++) {
            float b = QP[i * d + j];
            float *o = out + i * HS_TILE_R;
            for (int t = 0; t < HS_TILE_R; t++) o[t] += b * xr[t];
        }
    }
    for (int i = 0; i < HS_TILE_Q; i++) {
        uint32_t m = 0;
        for (int t = 0; t < HS_TILE_R; t++) {
            float s = out[i * HS_TILE_R + t] * mul[t] + add[t];
            out[i * HS_TILE_R + t] = s;
            m |= (uint32_t)(s >= thr[i]) << t;
        }
        masks[i] = m;
    }
}

static double stream_sum_scalar(const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

#if HS_X86
/* ------------------------------------------------------------------ AVX2 */

__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/* Four chains of 8 lanes: one 128-d row is four steps, and the FMA latency
 * (4-5 cycles) is hidden behind the other chains, so a scan runs at the
 * memory's speed, not the FMA chain's. */
__attribute__((target("avx2,fma"))) static inline float dot_avx2(const float *a,
                                                                const float *b, int64_t d) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= d; j += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 16), _mm256_loadu_ps(b + j + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 24), _mm256_loadu_ps(b + j + 24), s3);
    }
    for (; j + 8 <= d; j += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; j < d; j++) s += a[j] * b[j];
    return s;
}

__attribute__((target("avx2,fma"))) static inline float l2sq_avx2(const float *a,
                                                                 const float *b, int64_t d) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= d; j += 32) {
        __m256 t0 = _mm256_sub_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j));
        __m256 t1 = _mm256_sub_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8));
        __m256 t2 = _mm256_sub_ps(_mm256_loadu_ps(a + j + 16), _mm256_loadu_ps(b + j + 16));
        __m256 t3 = _mm256_sub_ps(_mm256_loadu_ps(a + j + 24), _mm256_loadu_ps(b + j + 24));
        s0 = _mm256_fmadd_ps(t0, t0, s0);
        s1 = _mm256_fmadd_ps(t1, t1, s1);
        s2 = _mm256_fmadd_ps(t2, t2, s2);
        s3 = _mm256_fmadd_ps(t3, t3, s3);
    }
    for (; j + 8 <= d; j += 8) {
        __m256 t0 = _mm256_sub_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j));
        s0 = _mm256_fmadd_ps(t0, t0, s0);
    }
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; j < d; j++) {
        float t = a[j] - b[j];
        s += t * t;
    }
    return s;
}

/* q . c for int8 codes c: widened to float 8 (AVX2) / 16 (AVX-512) at a time. */
/* Widening int8 -> int32 -> float costs two instructions per 8 codes, so the
 * int8 scan is compute-bound where the float scan is memory-bound: four chains
 * keep the converts and FMAs of different steps overlapping. */
#define I8X8_AVX2(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
__attribute__((target("avx2,fma"))) static inline float dot_i8_avx2(const float *q,
                                                                   const int8_t *c, int64_t d) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= d; j += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), I8X8_AVX2(c + j), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 8), I8X8_AVX2(c + j + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 16), I8X8_AVX2(c + j + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 24), I8X8_AVX2(c + j + 24), s3);
    }
    for (; j + 8 <= d; j += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), I8X8_AVX2(c + j), s0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; j < d; j++) s += q[j] * (float)c[j];
    return s;
}

HS_ROWS(dot_rows_avx2, __attribute__((target("avx2,fma"))), dot_avx2)
HS_ROWS(l2sq_rows_avx2, __attribute__((target("avx2,fma"))), l2sq_avx2)
HS_ROWS_I8(dot_i8_rows_avx2, __attribute__((target("avx2,fma"))), dot_i8_avx2)

__attribute__((target("avx2,fma"))) static void tile_avx2(
    const float *XT, int64_t ldx, int64_t d, const float *QP, const float *mul,
    const float *add, const float *thr, float *out, uint32_t *masks) {
    /* 8 queries x 32 rows = 8 x 4 ymm; done as two passes of 16 rows so the
     * 16 accumulators stay in the 16 ymm registers. */
    for (int half = 0; half < 2; half++) {
        __m256 c[HS_TILE_Q][2];
#pragma GCC unroll 8
        for (int i = 0; i < HS_TILE_Q; i++) c[i][0] = c[i][1] = _mm256_setzero_ps();
        const float *xb = XT + half * 16;
        for (int64_t j = 0; j < d; j++) {
            __m256 x0 = _mm256_loadu_ps(xb + j * ldx);
            __m256 x1 = _mm256_loadu_ps(xb + j * ldx + 8);
#pragma GCC unroll 8
            for (int i = 0; i < HS_TILE_Q; i++) {
                __m256 b = _mm256_broadcast_ss(QP + i * d + j);
                c[i][0] = _mm256_fmadd_ps(b, x0, c[i][0]);
                c[i][1] = _mm256_fmadd_ps(b, x1, c[i][1]);
            }
        }
        __m256 m0 = _mm256_loadu_ps(mul + half * 16), m1 = _mm256_loadu_ps(mul + half * 16 + 8);
        __m256 a0 = _mm256_loadu_ps(add + half * 16), a1 = _mm256_loadu_ps(add + half * 16 + 8);
#pragma GCC unroll 8
        for (int i = 0; i < HS_TILE_Q; i++) {
            __m256 t = _mm256_broadcast_ss(thr + i);
            __m256 s0 = _mm256_fmadd_ps(c[i][0], m0, a0), s1 = _mm256_fmadd_ps(c[i][1], m1, a1);
            _mm256_storeu_ps(out + i * HS_TILE_R + half * 16, s0);
            _mm256_storeu_ps(out + i * HS_TILE_R + half * 16 + 8, s1);
            uint32_t m = (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(s0, t, _CMP_GE_OQ)) |
                         ((uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(s1, t, _CMP_GE_OQ)) << 8);
            if (half == 0) masks[i] = m;
            else masks[i] |= m << 16;
        }
    }
}

__attribute__((target("avx2,fma"))) static double stream_sum_avx2(const float *x,
                                                                 int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 24));
    }
    double s = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += x[i];
    return s;
}

/* --------------------------------------------------------------- AVX-512 */

__attribute__((target("avx512f"))) static inline float dot_avx512(const float *a,
                                                          const float *b, int64_t d) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t j = 0;
    if (d >= 64) {
        /* four chains hide the FMA latency on long vectors */
        __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
        for (; j + 64 <= d; j += 64) {
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 16), _mm512_loadu_ps(b + j + 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 32), _mm512_loadu_ps(b + j + 32), s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 48), _mm512_loadu_ps(b + j + 48), s3);
        }
        s0 = _mm512_add_ps(s0, s2);
        s1 = _mm512_add_ps(s1, s3);
    }
    for (; j + 32 <= d; j += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 16), _mm512_loadu_ps(b + j + 16), s1);
    }
    for (; j + 16 <= d; j += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), s0);
    if (j < d) {
        /* masked loads never fault past the end: no scalar tail needed */
        __mmask16 m = (__mmask16)((1u << (d - j)) - 1u);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + j), _mm512_maskz_loadu_ps(m, b + j), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

__attribute__((target("avx512f"))) static inline float l2sq_avx512(const float *a,
                                                                  const float *b, int64_t d) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 64 <= d; j += 64) {
        __m512 t0 = _mm512_sub_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j));
        __m512 t1 = _mm512_sub_ps(_mm512_loadu_ps(a + j + 16), _mm512_loadu_ps(b + j + 16));
        __m512 t2 = _mm512_sub_ps(_mm512_loadu_ps(a + j + 32), _mm512_loadu_ps(b + j + 32));
        __m512 t3 = _mm512_sub_ps(_mm512_loadu_ps(a + j + 48), _mm512_loadu_ps(b + j + 48));
        s0 = _mm512_fmadd_ps(t0, t0, s0);
        s1 = _mm512_fmadd_ps(t1, t1, s1);
        s2 = _mm512_fmadd_ps(t2, t2, s2);
        s3 = _mm512_fmadd_ps(t3, t3, s3);
    }
    for (; j + 16 <= d; j += 16) {
        __m512 t0 = _mm512_sub_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j));
        s0 = _mm512_fmadd_ps(t0, t0, s0);
    }
    if (j < d) {
        __mmask16 m = (__mmask16)((1u << (d - j)) - 1u);
        __m512 t = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, a + j), _mm512_maskz_loadu_ps(m, b + j));
        s1 = _mm512_fmadd_ps(t, t, s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

#define I8X16_512(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
__attribute__((target("avx512f"))) static inline float dot_i8_avx512(const float *q,
                                                                    const int8_t *c, int64_t d) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 64 <= d; j += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), I8X16_512(c + j), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 16), I8X16_512(c + j + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 32), I8X16_512(c + j + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 48), I8X16_512(c + j + 48), s3);
    }
    for (; j + 16 <= d; j += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), I8X16_512(c + j), s0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    for (; j < d; j++) s += q[j] * (float)c[j];
    return s;
}

HS_ROWS_I8(dot_i8_rows_avx512, __attribute__((target("avx512f"))), dot_i8_avx512)

__attribute__((target("avx512f"))) static void tile_avx512(
    const float *XT, int64_t ldx, int64_t d, const float *QP, const float *mul,
    const float *add, const float *thr, float *out, uint32_t *masks) {
    /* 8 queries x 32 rows: 16 zmm accumulators, 2 row loads + 8 broadcasts
     * per 16 FMAs, so the loop is bound by FMA throughput, not loads. */
    __m512 c[HS_TILE_Q][2];
#pragma GCC unroll 8
    for (int i = 0; i < HS_TILE_Q; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    for (int64_t j = 0; j < d; j++) {
        __m512 x0 = _mm512_loadu_ps(XT + j * ldx);
        __m512 x1 = _mm512_loadu_ps(XT + j * ldx + 16);
#pragma GCC unroll 8
        for (int i = 0; i < HS_TILE_Q; i++) {
            __m512 b = _mm512_set1_ps(QP[i * d + j]);
            c[i][0] = _mm512_fmadd_ps(b, x0, c[i][0]);
            c[i][1] = _mm512_fmadd_ps(b, x1, c[i][1]);
        }
    }
    __m512 m0 = _mm512_loadu_ps(mul), m1 = _mm512_loadu_ps(mul + 16);
    __m512 a0 = _mm512_loadu_ps(add), a1 = _mm512_loadu_ps(add + 16);
#pragma GCC unroll 8
    for (int i = 0; i < HS_TILE_Q; i++) {
        __m512 t = _mm512_set1_ps(thr[i]);
        __m512 s0 = _mm512_fmadd_ps(c[i][0], m0, a0), s1 = _mm512_fmadd_ps(c[i][1], m1, a1);
        _mm512_storeu_ps(out + i * HS_TILE_R, s0);
        _mm512_storeu_ps(out + i * HS_TILE_R + 16, s1);
        masks[i] = (uint32_t)_mm512_cmp_ps_mask(s0, t, _CMP_GE_OQ) |
                   ((uint32_t)_mm512_cmp_ps_mask(s1, t, _CMP_GE_OQ) << 16);
    }
}

__attribute__((target("avx512f"))) static double stream_sum_avx512(const float *x,
                                                                  int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
        s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_loadu_ps(x + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_loadu_ps(x + i + 48));
    }
    double s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    for (; i < n; i++) s += x[i];
    return s;
}
#endif /* HS_X86 */

#if HS_NEON
/* ------------------------------------------------------------------ NEON */
/* AArch64 only: NEON (Advanced SIMD) is part of the base ISA there, so these
 * need no target attribute and no run-time check. Each loop keeps at least
 * four independent float32x4 FMA chains, enough to cover the FMA latency of
 * current cores (4 cycles, 2-4 pipes). */

static inline float dot_neon(const float *a, const float *b, int64_t d) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0), s3 = vdupq_n_f32(0);
    int64_t j = 0;
    if (d >= 32) {
        float32x4_t s4 = vdupq_n_f32(0), s5 = vdupq_n_f32(0), s6 = vdupq_n_f32(0), s7 = vdupq_n_f32(0);
        for (; j + 32 <= d; j += 32) {
            s0 = vfmaq_f32(s0, vld1q_f32(a + j), vld1q_f32(b + j));
            s1 = vfmaq_f32(s1, vld1q_f32(a + j + 4), vld1q_f32(b + j + 4));
            s2 = vfmaq_f32(s2, vld1q_f32(a + j + 8), vld1q_f32(b + j + 8));
            s3 = vfmaq_f32(s3, vld1q_f32(a + j + 12), vld1q_f32(b + j + 12));
            s4 = vfmaq_f32(s4, vld1q_f32(a + j + 16), vld1q_f32(b + j + 16));
            s5 = vfmaq_f32(s5, vld1q_f32(a + j + 20), vld1q_f32(b + j + 20));
            s6 = vfmaq_f32(s6, vld1q_f32(a + j + 24), vld1q_f32(b + j + 24));
            s7 = vfmaq_f32(s7, vld1q_f32(a + j + 28), vld1q_f32(b + j + 28));
        }
        s0 = vaddq_f32(s0, s4);
        s1 = vaddq_f32(s1, s5);
        s2 = vaddq_f32(s2, s6);
        s3 = vaddq_f32(s3, s7);
    }
    for (; j + 16 <= d; j += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + j), vld1q_f32(b + j));
        s1 = vfmaq_f32(s1, vld1q_f32(a + j + 4), vld1q_f32(b + j + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + j + 8), vld1q_f32(b + j + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + j + 12), vld1q_f32(b + j + 12));
    }
    for (; j + 4 <= d; j += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + j), vld1q_f32(b + j));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; j < d; j++) s += a[j] * b[j];
    return s;
}

static inline float l2sq_neon(const float *a, const float *b, int64_t d) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0), s3 = vdupq_n_f32(0);
    int64_t j = 0;
    for (; j + 16 <= d; j += 16) {
        float32x4_t t0 = vsubq_f32(vld1q_f32(a + j), vld1q_f32(b + j));
        float32x4_t t1 = vsubq_f32(vld1q_f32(a + j + 4), vld1q_f32(b + j + 4));
        float32x4_t t2 = vsubq_f32(vld1q_f32(a + j + 8), vld1q_f32(b + j + 8));
        float32x4_t t3 = vsubq_f32(vld1q_f32(a + j + 12), vld1q_f32(b + j + 12));
        s0 = vfmaq_f32(s0, t0, t0);
        s1 = vfmaq_f32(s1, t1, t1);
        s2 = vfmaq_f32(s2, t2, t2);
        s3 = vfmaq_f32(s3, t3, t3);
    }
    for (; j + 4 <= d; j += 4) {
        float32x4_t t0 = vsubq_f32(vld1q_f32(a + j), vld1q_f32(b + j));
        s0 = vfmaq_f32(s0, t0, t0);
    }
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; j < d; j++) {
        float t = a[j] - b[j];
        s += t * t;
    }
    return s;
}

/* q . c for int8 codes c and a float32 query: the codes are widened
 * int8 -> int16 -> int32 -> float32 (exact), 16 per step, into four FMA
 * chains. The query stays float32, so the integer dot-product instructions
 * (SDOT / vdotq_s32, or vmull_s8 + vpadalq_s16) have nothing to multiply:
 * they need int8 on both sides. */
static inline float32x4_t i8_lo_lo(int8x16_t c) { return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vget_low_s8(c))))); }
static inline float32x4_t i8_lo_hi(int8x16_t c) { return vcvtq_f32_s32(vmovl_high_s16(vmovl_s8(vget_low_s8(c)))); }
static inline float32x4_t i8_hi_lo(int8x16_t c) { return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_high_s8(c)))); }
static inline float32x4_t i8_hi_hi(int8x16_t c) { return vcvtq_f32_s32(vmovl_high_s16(vmovl_high_s8(c))); }

static inline float dot_i8_neon(const float *q, const int8_t *c, int64_t d) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0), s3 = vdupq_n_f32(0);
    int64_t j = 0;
    for (; j + 16 <= d; j += 16) {
        int8x16_t cv = vld1q_s8(c + j);
        s0 = vfmaq_f32(s0, vld1q_f32(q + j), i8_lo_lo(cv));
        s1 = vfmaq_f32(s1, vld1q_f32(q + j + 4), i8_lo_hi(cv));
        s2 = vfmaq_f32(s2, vld1q_f32(q + j + 8), i8_hi_lo(cv));
        s3 = vfmaq_f32(s3, vld1q_f32(q + j + 12), i8_hi_hi(cv));
    }
    if (j + 8 <= d) {
        int16x8_t w = vmovl_s8(vld1_s8(c + j));
        s0 = vfmaq_f32(s0, vld1q_f32(q + j), vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))));
        s1 = vfmaq_f32(s1, vld1q_f32(q + j + 4), vcvtq_f32_s32(vmovl_high_s16(w)));
        j += 8;
    }
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; j < d; j++) s += q[j] * (float)c[j];
    return s;
}

HS_ROWS(dot_rows_neon, , dot_neon)
HS_ROWS(l2sq_rows_neon, , l2sq_neon)
HS_ROWS_I8(dot_i8_rows_neon, , dot_i8_neon)

/* 8 queries x 32 rows, done as four passes of 8 rows: 16 float32x4
 * accumulators (8 queries x 2), 2 row loads per dimension, and the query
 * values taken four dimensions at a time with one load per query and
 * by-lane FMAs (vfmaq_laneq_f32), so 26 of the 32 vector registers are live. */
static void tile_neon(const float *XT, int64_t ldx, int64_t d, const float *QP,
                      const float *mul, const float *add, const float *thr, float *out,
                      uint32_t *masks) {
    const uint32x4_t lane_bits = {1u, 2u, 4u, 8u};
    for (int i = 0; i < HS_TILE_Q; i++) masks[i] = 0;
    for (int part = 0; part < HS_TILE_R / 8; part++) {
        float32x4_t c[HS_TILE_Q][2];
#pragma GCC unroll 8
        for (int i = 0; i < HS_TILE_Q; i++) c[i][0] = c[i][1] = vdupq_n_f32(0);
        const float *xb = XT + part * 8;
        int64_t j = 0;
        for (; j + 4 <= d; j += 4) {
            float32x4_t qv[HS_TILE_Q];
#pragma GCC unroll 8
            for (int i = 0; i < HS_TILE_Q; i++) qv[i] = vld1q_f32(QP + i * d + j);
#define HS_TILE_NEON_LANE(L)                                                       \
    {                                                                              \
        float32x4_t x0 = vld1q_f32(xb + (j + L) * ldx);                            \
        float32x4_t x1 = vld1q_f32(xb + (j + L) * ldx + 4);                        \
        _Pragma("GCC unroll 8") for (int i = 0; i < HS_TILE_Q; i++) {              \
            c[i][0] = vfmaq_laneq_f32(c[i][0], x0, qv[i], L);                      \
            c[i][1] = vfmaq_laneq_f32(c[i][1], x1, qv[i], L);                      \
        }                                                                          \
    }
            HS_TILE_NEON_LANE(0)
            HS_TILE_NEON_LANE(1)
            HS_TILE_NEON_LANE(2)
            HS_TILE_NEON_LANE(3)
#undef HS_TILE_NEON_LANE
        }
        for (; j < d; j++) {
            float32x4_t x0 = vld1q_f32(xb + j * ldx), x1 = vld1q_f32(xb + j * ldx + 4);
#pragma GCC unroll 8
            for (int i = 0; i < HS_TILE_Q; i++) {
                float32x4_t b = vdupq_n_f32(QP[i * d + j]);
                c[i][0] = vfmaq_f32(c[i][0], b, x0);
                c[i][1] = vfmaq_f32(c[i][1], b, x1);
            }
        }
        const int r0 = part * 8;
        float32x4_t m0 = vld1q_f32(mul + r0), m1 = vld1q_f32(mul + r0 + 4);
        float32x4_t a0 = vld1q_f32(add + r0), a1 = vld1q_f32(add + r0 + 4);
#pragma GCC unroll 8
        for (int i = 0; i < HS_TILE_Q; i++) {
            float32x4_t t = vdupq_n_f32(thr[i]);
            float32x4_t s0 = vfmaq_f32(a0, c[i][0], m0), s1 = vfmaq_f32(a1, c[i][1], m1);
            vst1q_f32(out + i * HS_TILE_R + r0, s0);
            vst1q_f32(out + i * HS_TILE_R + r0 + 4, s1);
            /* >= is false on NaN, like the scalar comparison and _CMP_GE_OQ */
            uint32_t m = vaddvq_u32(vandq_u32(vcgeq_f32(s0, t), lane_bits)) |
                         (vaddvq_u32(vandq_u32(vcgeq_f32(s1, t), lane_bits)) << 4);
            masks[i] |= m << r0;
        }
    }
}

static double stream_sum_neon(const float *x, int64_t n) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0), s3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vaddq_f32(s0, vld1q_f32(x + i));
        s1 = vaddq_f32(s1, vld1q_f32(x + i + 4));
        s2 = vaddq_f32(s2, vld1q_f32(x + i + 8));
        s3 = vaddq_f32(s3, vld1q_f32(x + i + 12));
    }
    double s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += x[i];
    return s;
}
#endif /* HS_NEON */

/* -------------------------------------------------------------- dispatch */

typedef float (*pair_fn)(const float *, const float *, int64_t);
typedef void (*rows_fn)(const float *, int64_t, const int64_t *, int64_t, int64_t,
                        const float *, float *);
typedef void (*tile_fn)(const float *, int64_t, int64_t, const float *, const float *,
                        const float *, const float *, float *, uint32_t *);
typedef double (*sum_fn)(const float *, int64_t);
typedef float (*i8_fn)(const float *, const int8_t *, int64_t);
typedef void (*i8_rows_fn)(const int8_t *, int64_t, const int64_t *, int64_t, int64_t,
                           const float *, float *);

static struct {
    int level;
    pair_fn dot, l2sq;
    rows_fn dot_rows, l2sq_rows;
    tile_fn tile;
    sum_fn sum;
    i8_fn dot_i8;
    i8_rows_fn dot_i8_rows;
} g_impl = {HS_SIMD_SCALAR, dot_scalar, l2sq_scalar, dot_rows_scalar, l2sq_rows_scalar,
            tile_scalar, stream_sum_scalar, dot_i8_scalar, dot_i8_rows_scalar};

/* The best level this CPU runs: AVX-512F, else AVX2 + FMA, else scalar on
 * x86; NEON on AArch64 (part of its base ISA); scalar anywhere else. */
static int cpu_level(void) {
#if HS_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return HS_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return HS_SIMD_AVX2;
#elif HS_NEON
    return HS_SIMD_NEON;
#endif
    return HS_SIMD_SCALAR;
}

int hs_simd_available(int level) {
    int best = cpu_level();
    if (level == HS_SIMD_SCALAR) return 1;
#if HS_X86
    if (level == HS_SIMD_AVX2) return best == HS_SIMD_AVX2 || best == HS_SIMD_AVX512;
    if (level == HS_SIMD_AVX512) return best == HS_SIMD_AVX512;
#endif
    return level == best;
}

int hs_simd_force(int level) {
    /* a level this CPU lacks (AVX-512 on an AVX2 machine, NEON on x86, AVX2 on
     * ARM, an unknown number) falls back to the best one it has */
    if (level < HS_SIMD_SCALAR) level = HS_SIMD_SCALAR;
    if (!hs_simd_available(level)) level = cpu_level();
    g_impl.level = HS_SIMD_SCALAR;
    g_impl.dot = dot_scalar;
    g_impl.l2sq = l2sq_scalar;
    g_impl.dot_rows = dot_rows_scalar;
    g_impl.l2sq_rows = l2sq_rows_scalar;
    g_impl.tile = tile_scalar;
    g_impl.sum = stream_sum_scalar;
    g_impl.dot_i8 = dot_i8_scalar;
    g_impl.dot_i8_rows = dot_i8_rows_scalar;
#if HS_X86
    if (level == HS_SIMD_AVX2) {
        g_impl.level = level;
        g_impl.dot = dot_avx2;
        g_impl.l2sq = l2sq_avx2;
        g_impl.dot_rows = dot_rows_avx2;
        g_impl.l2sq_rows = l2sq_rows_avx2;
        g_impl.tile = tile_avx2;
        g_impl.sum = stream_sum_avx2;
        g_impl.dot_i8 = dot_i8_avx2;
        g_impl.dot_i8_rows = dot_i8_rows_avx2;
    } else if (level == HS_SIMD_AVX512) {
        g_impl.level = level;
        g_impl.dot = dot_avx512;
        g_impl.l2sq = l2sq_avx512;
        /* a single-query scan is memory-bound: 512-bit rows gain nothing over 256-bit
         * ones and pay a longer horizontal sum per row (measured on Zen 4: 29 vs 36
         * GB/s at 1M x 128, benchmarks/bench_scan.py), and on Intel they can lower the
         * clock; batches (the tile) and int8 rows keep 512 bits, which they use */
        g_impl.dot_rows = dot_rows_avx2;
        g_impl.l2sq_rows = l2sq_rows_avx2;
        g_impl.tile = tile_avx512;
        g_impl.sum = stream_sum_avx512;
        g_impl.dot_i8 = dot_i8_avx512;
        g_impl.dot_i8_rows = dot_i8_rows_avx512;
    }
#elif HS_NEON
    if (level == HS_SIMD_NEON) {
        g_impl.level = level;
        g_impl.dot = dot_neon;
        g_impl.l2sq = l2sq_neon;
        g_impl.dot_rows = dot_rows_neon;
        g_impl.l2sq_rows = l2sq_rows_neon;
        g_impl.tile = tile_neon;
        g_impl.sum = stream_sum_neon;
        g_impl.dot_i8 = dot_i8_neon;
        g_impl.dot_i8_rows = dot_i8_rows_neon;
    }
#endif
    return g_impl.level;
}

__attribute__((constructor)) static void hs_distance_init(void) { hs_simd_force(cpu_level()); }

int hs_simd_level(void) { return g_impl.level; }
float hs_dot(const float *a, const float *b, int64_t d) { return g_impl.dot(a, b, d); }
float hs_l2sq(const float *a, const float *b, int64_t d) { return g_impl.l2sq(a, b, d); }
void hs_dot_rows(const float *X, int64_t d, const int64_t *rows, int64_t n, int64_t row0,
                 const float *q, float *out) {
    g_impl.dot_rows(X, d, rows, n, row0, q, out);
}
void hs_l2sq_rows(const float *X, int64_t d, const int64_t *rows, int64_t n, int64_t row0,
                  const float *q, float *out) {
    g_impl.l2sq_rows(X, d, rows, n, row0, q, out);
}
void hs_score_tile(const float *XT, int64_t ldx, int64_t d, const float *QP,
                   const float *mul, const float *add, const float *thr, float *out,
                   uint32_t *masks) {
    g_impl.tile(XT, ldx, d, QP, mul, add, thr, out, masks);
}
double hs_stream_sum(const float *x, int64_t n) { return g_impl.sum(x, n); }
float hs_dot_i8(const float *q, const int8_t *c, int64_t d) { return g_impl.dot_i8(q, c, d); }
hs_pair_fn hs_dot_impl(void) { return g_impl.dot; }
hs_pair_fn hs_l2sq_impl(void) { return g_impl.l2sq; }
hs_i8_fn hs_dot_i8_impl(void) { return g_impl.dot_i8; }
void hs_dot_i8_rows(const int8_t *C, int64_t d, const int64_t *rows, int64_t n, int64_t row0,
                    const float *q, float *out) {
    g_impl.dot_i8_rows(C, d, rows, n, row0, q, out);
}
