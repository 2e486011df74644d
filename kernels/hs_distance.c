/* Distance kernels: scalar, AVX2+FMA and AVX-512 variants, dispatched once. */
#include "hs_distance.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HS_X86 1
#else
#define HS_X86 0
#endif

/* ---------------------------------------------------------------- scalar */

static float dot_scalar(const float *a, const float *b, int64_t d) {
    /* four partial sums: lets the compiler pipeline without -ffast-math */
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t j = 0;
    for (; j + 4 <= d; j += 4) {
        s0 += a[j] * b[j];
        s1 += a[j + 1] * b[j + 1];
        s2 += a[j + 2] * b[j + 2];
        s3 += a[j + 3] * b[j + 3];
    }
    for (; j < d; j++) s0 += a[j] * b[j];
    return (s0 + s1) + (s2 + s3);
}

static float l2sq_scalar(const float *a, const float *b, int64_t d) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t j = 0;
    for (; j + 4 <= d; j += 4) {
        float t0 = a[j] - b[j], t1 = a[j + 1] - b[j + 1];
        float t2 = a[j + 2] - b[j + 2], t3 = a[j + 3] - b[j + 3];
        s0 += t0 * t0;
        s1 += t1 * t1;
        s2 += t2 * t2;
        s3 += t3 * t3;
    }
    for (; j < d; j++) {
        float t = a[j] - b[j];
        s0 += t * t;
    }
    return (s0 + s1) + (s2 + s3);
}

static float dot_i8_scalar(const float *q, const int8_t *c, int64_t d) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t j = 0;
    for (; j + 4 <= d; j += 4) {
        s0 += q[j] * (float)c[j];
        s1 += q[j + 1] * (float)c[j + 1];
        s2 += q[j + 2] * (float)c[j + 2];
        s3 += q[j + 3] * (float)c[j + 3];
    }
    for (; j < d; j++) s0 += q[j] * (float)c[j];
    return (s0 + s1) + (s2 + s3);
}

static void dot_rows_scalar(const float *X, int64_t d, const int64_t *rows,
                            int64_t n, int64_t row0, const float *q, float *out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows ? rows[i] : row0 + i;
        out[i] = dot_scalar(X + r * d, q, d);
    }
}

static void l2sq_rows_scalar(const float *X, int64_t d, const int64_t *rows,
                             int64_t n, int64_t row0, const float *q, float *out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rows ? rows[i] : row0 + i;
        out[i] = l2sq_scalar(X + r * d, q, d);
    }
}

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

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a,
                                                         const float *b, int64_t d) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= d; j += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), s1);
    }
    for (; j + 8 <= d; j += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; j < d; j++) s += a[j] * b[j];
    return s;
}

__attribute__((target("avx2,fma"))) static float l2sq_avx2(const float *a,
                                                          const float *b, int64_t d) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= d; j += 16) {
        __m256 t0 = _mm256_sub_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j));
        __m256 t1 = _mm256_sub_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8));
        s0 = _mm256_fmadd_ps(t0, t0, s0);
        s1 = _mm256_fmadd_ps(t1, t1, s1);
    }
    for (; j + 8 <= d; j += 8) {
        __m256 t0 = _mm256_sub_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j));
        s0 = _mm256_fmadd_ps(t0, t0, s0);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; j < d; j++) {
        float t = a[j] - b[j];
        s += t * t;
    }
    return s;
}

/* q . c for int8 codes c: widened to float 8 (AVX2) / 16 (AVX-512) at a time. */
__attribute__((target("avx2,fma"))) static float dot_i8_avx2(const float *q,
                                                            const int8_t *c, int64_t d) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= d; j += 16) {
        __m256 c0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(c + j))));
        __m256 c1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(c + j + 8))));
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), c0, acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 8), c1, acc1);
    }
    for (; j + 8 <= d; j += 8) {
        __m256 c0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(c + j))));
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), c0, acc0);
    }
    float s = hsum256(_mm256_add_ps(acc0, acc1));
    for (; j < d; j++) s += q[j] * (float)c[j];
    return s;
}

/* Four rows at once: four independent FMA chains hide the FMA latency. */
#define HS_ROWS4_AVX2(NAME, BODY)                                                  \
    __attribute__((target("avx2,fma"))) static void NAME(                          \
        const float *X, int64_t d, const int64_t *rows, int64_t n, int64_t row0,   \
        const float *q, float *out) {                                              \
        int64_t i = 0;                                                             \
        for (; i + 4 <= n; i += 4) {                                               \
            const float *x0 = X + (rows ? rows[i] : row0 + i) * d;                 \
            const float *x1 = X + (rows ? rows[i + 1] : row0 + i + 1) * d;         \
            const float *x2 = X + (rows ? rows[i + 2] : row0 + i + 2) * d;         \
            const float *x3 = X + (rows ? rows[i + 3] : row0 + i + 3) * d;         \
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();             \
            __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();             \
            int64_t j = 0;                                                         \
            for (; j + 8 <= d; j += 8) {                                           \
                __m256 qv = _mm256_loadu_ps(q + j);                                \
                BODY                                                               \
            }                                                                      \
            float r0 = hsum256(a0), r1 = hsum256(a1), r2 = hsum256(a2),            \
                  r3 = hsum256(a3);                                                \
            for (; j < d; j++) {                                                   \
                SCALAR_TAIL                                                        \
            }                                                                      \
            out[i] = r0; out[i + 1] = r1; out[i + 2] = r2; out[i + 3] = r3;        \
        }                                                                          \
        for (; i < n; i++) {                                                       \
            const float *x = X + (rows ? rows[i] : row0 + i) * d;                  \
            out[i] = SINGLE(x, q, d);                                              \
        }                                                                          \
    }

#define BODY_DOT                                                                  \
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + j), qv, a0);                         \
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + j), qv, a1);                         \
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x2 + j), qv, a2);                         \
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x3 + j), qv, a3);
#define BODY_L2                                                                   \
    { __m256 t0 = _mm256_sub_ps(_mm256_loadu_ps(x0 + j), qv);                      \
      __m256 t1 = _mm256_sub_ps(_mm256_loadu_ps(x1 + j), qv);                      \
      __m256 t2 = _mm256_sub_ps(_mm256_loadu_ps(x2 + j), qv);                      \
      __m256 t3 = _mm256_sub_ps(_mm256_loadu_ps(x3 + j), qv);                      \
      a0 = _mm256_fmadd_ps(t0, t0, a0); a1 = _mm256_fmadd_ps(t1, t1, a1);          \
      a2 = _mm256_fmadd_ps(t2, t2, a2); a3 = _mm256_fmadd_ps(t3, t3, a3); }

#define SCALAR_TAIL r0 += x0[j] * q[j]; r1 += x1[j] * q[j]; r2 += x2[j] * q[j]; r3 += x3[j] * q[j];
#define SINGLE dot_avx2
HS_ROWS4_AVX2(dot_rows_avx2, BODY_DOT)
#undef SCALAR_TAIL
#undef SINGLE
#define SCALAR_TAIL                                                                \
    { float t0 = x0[j] - q[j], t1 = x1[j] - q[j], t2 = x2[j] - q[j], t3 = x3[j] - q[j]; \
      r0 += t0 * t0; r1 += t1 * t1; r2 += t2 * t2; r3 += t3 * t3; }
#define SINGLE l2sq_avx2
HS_ROWS4_AVX2(l2sq_rows_avx2, BODY_L2)
#undef SCALAR_TAIL
#undef SINGLE

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

__attribute__((target("avx512f"))) static float dot_avx512(const float *a,
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

__attribute__((target("avx512f"))) static float l2sq_avx512(const float *a,
                                                           const float *b, int64_t d) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= d; j += 32) {
        __m512 t0 = _mm512_sub_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j));
        __m512 t1 = _mm512_sub_ps(_mm512_loadu_ps(a + j + 16), _mm512_loadu_ps(b + j + 16));
        s0 = _mm512_fmadd_ps(t0, t0, s0);
        s1 = _mm512_fmadd_ps(t1, t1, s1);
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
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

__attribute__((target("avx512f"))) static float dot_i8_avx512(const float *q,
                                                           const int8_t *c, int64_t d) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= d; j += 32) {
        __m512 c0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(c + j))));
        __m512 c1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(c + j + 16))));
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), c0, acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 16), c1, acc1);
    }
    for (; j + 16 <= d; j += 16) {
        __m512 c0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(c + j))));
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), c0, acc0);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; j < d; j++) s += q[j] * (float)c[j];
    return s;
}

#define HS_ROWS4_AVX512(NAME, STEP, SINGLE)                                        \
    __attribute__((target("avx512f"))) static void NAME(                           \
        const float *X, int64_t d, const int64_t *rows, int64_t n, int64_t row0,   \
        const float *q, float *out) {                                              \
        int64_t i = 0;                                                             \
        for (; i + 4 <= n; i += 4) {                                               \
            const float *x0 = X + (rows ? rows[i] : row0 + i) * d;                 \
            const float *x1 = X + (rows ? rows[i + 1] : row0 + i + 1) * d;         \
            const float *x2 = X + (rows ? rows[i + 2] : row0 + i + 2) * d;         \
            const float *x3 = X + (rows ? rows[i + 3] : row0 + i + 3) * d;         \
            __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();             \
            __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();             \
            for (int64_t j = 0; j < d; j += 16) {                                  \
                __mmask16 m = (d - j >= 16) ? (__mmask16)0xFFFF                    \
                                            : (__mmask16)((1u << (d - j)) - 1u);   \
                __m512 qv = _mm512_maskz_loadu_ps(m, q + j);                       \
                STEP(a0, x0); STEP(a1, x1); STEP(a2, x2); STEP(a3, x3);            \
            }                                                                      \
            out[i] = _mm512_reduce_add_ps(a0);                                     \
            out[i + 1] = _mm512_reduce_add_ps(a1);                                 \
            out[i + 2] = _mm512_reduce_add_ps(a2);                                 \
            out[i + 3] = _mm512_reduce_add_ps(a3);                                 \
        }                                                                          \
        for (; i < n; i++) {                                                       \
            const float *x = X + (rows ? rows[i] : row0 + i) * d;                  \
            out[i] = SINGLE(x, q, d);                                              \
        }                                                                          \
    }
#define STEP_DOT(acc, x) acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, (x) + j), qv, acc)
#define STEP_L2(acc, x)                                                            \
    do {                                                                           \
        __m512 t_ = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, (x) + j), qv);           \
        acc = _mm512_fmadd_ps(t_, t_, acc);                                        \
    } while (0)
HS_ROWS4_AVX512(dot_rows_avx512, STEP_DOT, dot_avx512)
HS_ROWS4_AVX512(l2sq_rows_avx512, STEP_L2, l2sq_avx512)

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

/* -------------------------------------------------------------- dispatch */

typedef float (*pair_fn)(const float *, const float *, int64_t);
typedef void (*rows_fn)(const float *, int64_t, const int64_t *, int64_t, int64_t,
                        const float *, float *);
typedef void (*tile_fn)(const float *, int64_t, int64_t, const float *, const float *,
                        const float *, const float *, float *, uint32_t *);
typedef double (*sum_fn)(const float *, int64_t);
typedef float (*i8_fn)(const float *, const int8_t *, int64_t);

static struct {
    int level;
    pair_fn dot, l2sq;
    rows_fn dot_rows, l2sq_rows;
    tile_fn tile;
    sum_fn sum;
    i8_fn dot_i8;
} g_impl = {HS_SIMD_SCALAR, dot_scalar, l2sq_scalar, dot_rows_scalar, l2sq_rows_scalar,
            tile_scalar, stream_sum_scalar, dot_i8_scalar};

static int cpu_level(void) {
#if HS_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return HS_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return HS_SIMD_AVX2;
#endif
    return HS_SIMD_SCALAR;
}

int hs_simd_force(int level) {
    int best = cpu_level();
    if (level > best) level = best;
    if (level < HS_SIMD_SCALAR) level = HS_SIMD_SCALAR;
    g_impl.level = HS_SIMD_SCALAR;
    g_impl.dot = dot_scalar;
    g_impl.l2sq = l2sq_scalar;
    g_impl.dot_rows = dot_rows_scalar;
    g_impl.l2sq_rows = l2sq_rows_scalar;
    g_impl.tile = tile_scalar;
    g_impl.sum = stream_sum_scalar;
    g_impl.dot_i8 = dot_i8_scalar;
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
    } else if (level == HS_SIMD_AVX512) {
        g_impl.level = level;
        g_impl.dot = dot_avx512;
        g_impl.l2sq = l2sq_avx512;
        g_impl.dot_rows = dot_rows_avx512;
        g_impl.l2sq_rows = l2sq_rows_avx512;
        g_impl.tile = tile_avx512;
        g_impl.sum = stream_sum_avx512;
        g_impl.dot_i8 = dot_i8_avx512;
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
