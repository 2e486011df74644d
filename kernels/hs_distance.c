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

#if HS_NEON
/* ------------------------------------------------------------------ NEON */
/* AArch64 only: NEON (Advanced SIMD) is part of the base ISA there, so these
 * need no target attribute and no run-time check. Each loop keeps at least
 * four independent float32x4 FMA chains, enough to cover the FMA latency of
 * current cores (4 cycles, 2-4 pipes). */

static float dot_neon(const float *a, const float *b, int64_t d) {
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

static float l2sq_neon(const float *a, const float *b, int64_t d) {
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

static float dot_i8_neon(const float *q, const int8_t *c, int64_t d) {
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

/* Four rows at once, two float32x4 per row per step: eight FMA chains, the
 * query loaded once for the four rows. */
#define HS_ROWS4_NEON(NAME, STEP, TAIL, SINGLE)                                    \
    static void NAME(const float *X, int64_t d, const int64_t *rows, int64_t n,    \
                     int64_t row0, const float *q, float *out) {                   \
        int64_t i = 0;                                                             \
        for (; i + 4 <= n; i += 4) {                                               \
            const float *x0 = X + (rows ? rows[i] : row0 + i) * d;                 \
            const float *x1 = X + (rows ? rows[i + 1] : row0 + i + 1) * d;         \
            const float *x2 = X + (rows ? rows[i + 2] : row0 + i + 2) * d;         \
            const float *x3 = X + (rows ? rows[i + 3] : row0 + i + 3) * d;         \
            float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);                  \
            float32x4_t a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);                  \
            float32x4_t b0 = vdupq_n_f32(0), b1 = vdupq_n_f32(0);                  \
            float32x4_t b2 = vdupq_n_f32(0), b3 = vdupq_n_f32(0);                  \
            int64_t j = 0;                                                         \
            for (; j + 8 <= d; j += 8) {                                           \
                float32x4_t qa = vld1q_f32(q + j), qb = vld1q_f32(q + j + 4);      \
                STEP(a0, x0, qa, 0); STEP(a1, x1, qa, 0);                          \
                STEP(a2, x2, qa, 0); STEP(a3, x3, qa, 0);                          \
                STEP(b0, x0, qb, 4); STEP(b1, x1, qb, 4);                          \
                STEP(b2, x2, qb, 4); STEP(b3, x3, qb, 4);                          \
            }                                                                      \
            if (j + 4 <= d) {                                                      \
                float32x4_t qa = vld1q_f32(q + j);                                 \
                STEP(a0, x0, qa, 0); STEP(a1, x1, qa, 0);                          \
                STEP(a2, x2, qa, 0); STEP(a3, x3, qa, 0);                          \
                j += 4;                                                            \
            }                                                                      \
            float r0 = vaddvq_f32(vaddq_f32(a0, b0));                              \
            float r1 = vaddvq_f32(vaddq_f32(a1, b1));                              \
            float r2 = vaddvq_f32(vaddq_f32(a2, b2));                              \
            float r3 = vaddvq_f32(vaddq_f32(a3, b3));                              \
            for (; j < d; j++) {                                                   \
                TAIL(r0, x0); TAIL(r1, x1); TAIL(r2, x2); TAIL(r3, x3);            \
            }                                                                      \
            out[i] = r0; out[i + 1] = r1; out[i + 2] = r2; out[i + 3] = r3;        \
        }                                                                          \
        for (; i < n; i++) {                                                       \
            const float *x = X + (rows ? rows[i] : row0 + i) * d;                  \
            out[i] = SINGLE(x, q, d);                                              \
        }                                                                          \
    }
#define NSTEP_DOT(acc, x, qv, o) acc = vfmaq_f32(acc, vld1q_f32((x) + j + (o)), qv)
#define NSTEP_L2(acc, x, qv, o)                                                    \
    do {                                                                           \
        float32x4_t t_ = vsubq_f32(vld1q_f32((x) + j + (o)), qv);                  \
        acc = vfmaq_f32(acc, t_, t_);                                              \
    } while (0)
#define NTAIL_DOT(r, x) r += (x)[j] * q[j]
#define NTAIL_L2(r, x)                                                             \
    do {                                                                           \
        float t_ = (x)[j] - q[j];                                                  \
        r += t_ * t_;                                                              \
    } while (0)
HS_ROWS4_NEON(dot_rows_neon, NSTEP_DOT, NTAIL_DOT, dot_neon)
HS_ROWS4_NEON(l2sq_rows_neon, NSTEP_L2, NTAIL_L2, l2sq_neon)

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

static struct {
    int level;
    pair_fn dot, l2sq;
    rows_fn dot_rows, l2sq_rows;
    tile_fn tile;
    sum_fn sum;
    i8_fn dot_i8;
} g_impl = {HS_SIMD_SCALAR, dot_scalar, l2sq_scalar, dot_rows_scalar, l2sq_rows_scalar,
            tile_scalar, stream_sum_scalar, dot_i8_scalar};

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
