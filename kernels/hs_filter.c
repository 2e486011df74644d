#include <stdlib.h>
#include <string.h>
#include "hs_filter.h"
#include "hs_bitset.h"
#include "hs_distance.h"

#define CMP_LOOP(T, V, W0)                                                         \
    do {                                                                           \
        const T *c = (const T *)ins->col;                                          \
        for (int64_t w = (W0); w < nw; w++) {                                      \
            int64_t base = w * 64, end = base + 64 < n ? base + 64 : n;            \
            uint64_t bits = 0;                                                     \
            switch (ins->cmp) {                                                    \
            case HS_CMP_EQ: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] == V) << (i - base); break; \
            case HS_CMP_NE: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] != V) << (i - base); break; \
            case HS_CMP_LT: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] < V) << (i - base); break;  \
            case HS_CMP_LE: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] <= V) << (i - base); break; \
            case HS_CMP_GT: for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] > V) << (i - base); break;  \
            default:        for (int64_t i = base; i < end; i++) bits |= (uint64_t)(c[i] >= V) << (i - base); break; \
            }                                                                      \
            dst[w] = bits;                                                         \
        }                                                                          \
    } while (0)

#if defined(__x86_64__)
#include <immintrin.h>
/* AVX-512: one compare instruction per 8 rows, masks packed straight into words.
 * Only whole 64-row words; the caller finishes the tail with the scalar loop. */
#define I64_WORDS(PRED)                                                            \
    for (int64_t w = 0; w < full; w++) {                                           \
        const int64_t *p = c + w * 64;                                             \
        uint64_t bits = 0;                                                         \
        for (int k = 0; k < 8; k++)                                                \
            bits |= (uint64_t)_mm512_cmp_epi64_mask(_mm512_loadu_si512(p + 8 * k), vv, PRED) << (8 * k); \
        dst[w] = bits;                                                             \
    }
__attribute__((target("avx512f"))) static int64_t i64_words_avx512(const int64_t *c, int64_t v,
                                                                  int cmp, int64_t full,
                                                                  uint64_t *dst) {
    __m512i vv = _mm512_set1_epi64(v);
    switch (cmp) {
    case HS_CMP_EQ: I64_WORDS(_MM_CMPINT_EQ) break;
    case HS_CMP_NE: I64_WORDS(_MM_CMPINT_NE) break;
    case HS_CMP_LT: I64_WORDS(_MM_CMPINT_LT) break;
    case HS_CMP_LE: I64_WORDS(_MM_CMPINT_LE) break;
    case HS_CMP_GT: I64_WORDS(_MM_CMPINT_NLE) break;
    default: I64_WORDS(_MM_CMPINT_NLT) break;
    }
    return full;
}
#define F64_WORDS(PRED)                                                            \
    for (int64_t w = 0; w < full; w++) {                                           \
        const double *p = c + w * 64;                                              \
        uint64_t bits = 0;                                                         \
        for (int k = 0; k < 8; k++)                                                \
            bits |= (uint64_t)_mm512_cmp_pd_mask(_mm512_loadu_pd(p + 8 * k), vv, PRED) << (8 * k); \
        dst[w] = bits;                                                             \
    }
__attribute__((target("avx512f"))) static int64_t f64_words_avx512(const double *c, double v,
                                                                  int cmp, int64_t full,
                                                                  uint64_t *dst) {
    __m512d vv = _mm512_set1_pd(v);
    switch (cmp) { /* the same truth table as the C operators, NaN included */
    case HS_CMP_EQ: F64_WORDS(_CMP_EQ_OQ) break;
    case HS_CMP_NE: F64_WORDS(_CMP_NEQ_UQ) break;
    case HS_CMP_LT: F64_WORDS(_CMP_LT_OQ) break;
    case HS_CMP_LE: F64_WORDS(_CMP_LE_OQ) break;
    case HS_CMP_GT: F64_WORDS(_CMP_GT_OQ) break;
    default: F64_WORDS(_CMP_GE_OQ) break;
    }
    return full;
}
/* hs_simd_level() is AVX-512 only on a CPU that has it (hs_simd_force clamps),
 * and it follows force_simd("scalar") so the tests reach the scalar loop too. */
static int64_t i64_words_simd(const int64_t *c, int64_t v, int cmp, int64_t full, uint64_t *dst) {
    return hs_simd_level() == HS_SIMD_AVX512 ? i64_words_avx512(c, v, cmp, full, dst) : 0;
}
static int64_t f64_words_simd(const double *c, double v, int cmp, int64_t full, uint64_t *dst) {
    return hs_simd_level() == HS_SIMD_AVX512 ? f64_words_avx512(c, v, cmp, full, dst) : 0;
}
#elif defined(__aarch64__)
#include <arm_neon.h>
/* NEON: two rows per compare; eight rows' lane masks are narrowed 64 -> 16 bits
 * and weighted 1, 2, ..., 128 so one horizontal add gives their byte of the word. */
static inline uint64_t neon_bits8(uint64x2_t m0, uint64x2_t m1, uint64x2_t m2, uint64x2_t m3) {
    static const uint16_t weights[8] = {1, 2, 4, 8, 16, 32, 64, 128};
    uint32x4_t lo = vcombine_u32(vmovn_u64(m0), vmovn_u64(m1));
    uint32x4_t hi = vcombine_u32(vmovn_u64(m2), vmovn_u64(m3));
    uint16x8_t m = vcombine_u16(vmovn_u32(lo), vmovn_u32(hi));
    return vaddvq_u16(vandq_u16(m, vld1q_u16(weights)));
}
static inline uint64x2_t neon_not64(uint64x2_t m) {
    return vreinterpretq_u64_u32(vmvnq_u32(vreinterpretq_u32_u64(m)));
}
#define NEON_WORDS(T, LOAD, CMP)                                                   \
    for (int64_t w = 0; w < full; w++) {                                           \
        const T *p = c + w * 64;                                                   \
        uint64_t bits = 0;                                                         \
        for (int k = 0; k < 8; k++) {                                              \
            const T *q = p + 8 * k;                                                \
            bits |= neon_bits8(CMP(LOAD(q), vv), CMP(LOAD(q + 2), vv),             \
                               CMP(LOAD(q + 4), vv), CMP(LOAD(q + 6), vv)) << (8 * k); \
        }                                                                          \
        dst[w] = bits;                                                             \
    }
#define NE_S64(a, b) neon_not64(vceqq_s64(a, b))
#define NE_F64(a, b) neon_not64(vceqq_f64(a, b)) /* true on NaN, like != */
static int64_t i64_words_neon(const int64_t *c, int64_t v, int cmp, int64_t full, uint64_t *dst) {
    int64x2_t vv = vdupq_n_s64(v);
    switch (cmp) {
    case HS_CMP_EQ: NEON_WORDS(int64_t, vld1q_s64, vceqq_s64) break;
    case HS_CMP_NE: NEON_WORDS(int64_t, vld1q_s64, NE_S64) break;
    case HS_CMP_LT: NEON_WORDS(int64_t, vld1q_s64, vcltq_s64) break;
    case HS_CMP_LE: NEON_WORDS(int64_t, vld1q_s64, vcleq_s64) break;
    case HS_CMP_GT: NEON_WORDS(int64_t, vld1q_s64, vcgtq_s64) break;
    default: NEON_WORDS(int64_t, vld1q_s64, vcgeq_s64) break;
    }
    return full;
}
static int64_t f64_words_neon(const double *c, double v, int cmp, int64_t full, uint64_t *dst) {
    float64x2_t vv = vdupq_n_f64(v);
    switch (cmp) { /* ordered compares: false on NaN, like the C operators */
    case HS_CMP_EQ: NEON_WORDS(double, vld1q_f64, vceqq_f64) break;
    case HS_CMP_NE: NEON_WORDS(double, vld1q_f64, NE_F64) break;
    case HS_CMP_LT: NEON_WORDS(double, vld1q_f64, vcltq_f64) break;
    case HS_CMP_LE: NEON_WORDS(double, vld1q_f64, vcleq_f64) break;
    case HS_CMP_GT: NEON_WORDS(double, vld1q_f64, vcgtq_f64) break;
    default: NEON_WORDS(double, vld1q_f64, vcgeq_f64) break;
    }
    return full;
}
static int64_t i64_words_simd(const int64_t *c, int64_t v, int cmp, int64_t full, uint64_t *dst) {
    return hs_simd_level() == HS_SIMD_NEON ? i64_words_neon(c, v, cmp, full, dst) : 0;
}
static int64_t f64_words_simd(const double *c, double v, int cmp, int64_t full, uint64_t *dst) {
    return hs_simd_level() == HS_SIMD_NEON ? f64_words_neon(c, v, cmp, full, dst) : 0;
}
#else
static int64_t i64_words_simd(const int64_t *c, int64_t v, int cmp, int64_t full, uint64_t *dst) { return 0; }
static int64_t f64_words_simd(const double *c, double v, int cmp, int64_t full, uint64_t *dst) { return 0; }
#endif

static void and_present(uint64_t *dst, const uint8_t *present, int64_t n, int64_t nw) {
    for (int64_t w = 0; w < nw; w++) {
        int64_t base = w * 64, end = base + 64 < n ? base + 64 : n;
        uint64_t bits = 0;
        for (int64_t i = base; i < end; i++) bits |= (uint64_t)(present[i] != 0) << (i - base);
        dst[w] &= bits;
    }
}

static int eval_leaf(const hs_filter_instr *ins, int64_t n, int64_t nw, uint64_t *dst) {
    switch (ins->op) {
    case HS_F_I64: {
        int64_t v = ins->ival, w0 = 0;
        w0 = i64_words_simd((const int64_t *)ins->col, v, ins->cmp, n / 64, dst);
        CMP_LOOP(int64_t, v, w0);
        break;
    }
    case HS_F_F64: {
        double v = ins->fval;
        int64_t w0 = 0;
        w0 = f64_words_simd((const double *)ins->col, v, ins->cmp, n / 64, dst);
        CMP_LOOP(double, v, w0);
        break;
    }
    case HS_F_CODE: {
        const int32_t *c = (const int32_t *)ins->col;
        const uint8_t *t = ins->table;
        uint64_t tl = (uint64_t)ins->table_len;
        for (int64_t w = 0; w < nw; w++) {
            int64_t base = w * 64, end = base + 64 < n ? base + 64 : n;
            uint64_t bits = 0;
            for (int64_t i = base; i < end; i++) {
                /* negative codes (missing) wrap to huge unsigned and fail the bound */
                uint64_t code = (uint64_t)(int64_t)c[i];
                bits |= (uint64_t)(code < tl && t[code]) << (i - base);
            }
            dst[w] = bits;
        }
        break;
    }
    case HS_F_PRESENT:
        memset(dst, 0xFF, (size_t)nw * 8);
        and_present(dst, ins->present, n, nw);
        return HS_OK;
    case HS_F_BITS:
        memcpy(dst, ins->bits, (size_t)nw * 8);
        return HS_OK;
    case HS_F_ALL:
        memset(dst, 0xFF, (size_t)nw * 8);
        return HS_OK;
    case HS_F_NONE:
        memset(dst, 0, (size_t)nw * 8);
        return HS_OK;
    default:
        return HS_EINVAL;
    }
    if (ins->present) and_present(dst, ins->present, n, nw);
    return HS_OK;
}

int hs_filter_eval(const hs_filter_instr *prog, int64_t nprog, int64_t n,
                   const uint64_t *live, uint64_t *out) {
    int64_t nw = HS_WORDS(n);
    /* pre-pass: validate the program and find the stack depth it needs */
    int64_t depth = 0, max_depth = 0;
    for (int64_t p = 0; p < nprog; p++) {
        int32_t op = prog[p].op;
        if (op == HS_F_AND || op == HS_F_OR) {
            if (prog[p].nargs < 1 || prog[p].nargs > depth) return HS_EINVAL;
            depth -= prog[p].nargs - 1;
        } else if (op == HS_F_NOT) {
            if (depth < 1) return HS_EINVAL;
        } else {
            if ((op == HS_F_I64 || op == HS_F_F64 || op == HS_F_CODE) && !prog[p].col) return HS_EINVAL;
            if (op == HS_F_PRESENT && !prog[p].present) return HS_EINVAL;
            if (op == HS_F_BITS && !prog[p].bits) return HS_EINVAL;
            depth++;
        }
        if (depth > max_depth) max_depth = depth;
    }
    if (depth != 1) return HS_EINVAL;
    if (nw == 0) return HS_OK;

    uint64_t *stack = (uint64_t *)malloc((size_t)max_depth * (size_t)nw * 8);
    if (!stack) return HS_ENOMEM;
    int64_t top = 0; /* number of bitsets on the stack */
    int rc = HS_OK;
    for (int64_t p = 0; p < nprog && rc == HS_OK; p++) {
        const hs_filter_instr *ins = &prog[p];
        if (ins->op == HS_F_AND || ins->op == HS_F_OR) {
            uint64_t *first = stack + (top - ins->nargs) * nw;
            for (int64_t a = 1; a < ins->nargs; a++) {
                const uint64_t *src = first + a * nw;
                if (ins->op == HS_F_AND) hs_bitset_and(first, src, nw);
                else hs_bitset_or(first, src, nw);
            }
            top -= ins->nargs - 1;
        } else if (ins->op == HS_F_NOT) {
            hs_bitset_not(stack + (top - 1) * nw, nw);
        } else {
            rc = eval_leaf(ins, n, nw, stack + top * nw);
            top++;
        }
    }
    if (rc == HS_OK) {
        memcpy(out, stack, (size_t)nw * 8);
        if (live) hs_bitset_and(out, live, nw);
        hs_bitset_clear_tail(out, n);
    }
    free(stack);
    return rc;
}
