/* Integer code products for hs_rabitq.c: scalar, AVX2, AVX-512 (VPOPCNTDQ / BW) and NEON
 * variants of the same exact sums (see hs_rabitq_kern.h), picked by hs_simd_level(). */
#include <string.h>
#include "hs_rabitq_kern.h"
#include "hs_distance.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RQ_X86 1
#else
#define RQ_X86 0
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define RQ_NEON 1
#else
#define RQ_NEON 0
#endif

#define ROW(i) (codes + (rows ? rows[i] : row0 + (i)) * rs)

/* ---------------------------------------------------------------- scalar */

/* portable bit count: the builtin becomes a libgcc call without -mpopcnt */
static inline int popc_scalar(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((x * 0x0101010101010101ull) >> 56);
}

static void dots1_scalar(const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n,
                         int64_t row0, const uint8_t *qpack, int32_t *out) {
    const int64_t W = cb / 8;
    const uint64_t *pl = (const uint64_t *)qpack;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t *c = (const uint64_t *)ROW(i);
        int32_t s = 0;
        for (int64_t w = 0; w < W; w++)
            for (int j = 0; j < 8; j++) s += popc_scalar(c[w] & pl[j * W + w]) << j;
        out[i] = s;
    }
}

static void dots4_scalar(const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n,
                         int64_t row0, const uint8_t *qpack, int32_t *out) {
    const uint8_t *qe = qpack, *qo = qpack + cb;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *c = ROW(i);
        int32_t s = 0;
        for (int64_t m = 0; m < cb; m++) s += qe[m] * (c[m] & 15) + qo[m] * (c[m] >> 4);
        out[i] = s;
    }
}

#if RQ_X86
/* ------------------------------------------------------------------ AVX2 */

/* No bit-planes: each 32 code bits become 32 byte masks (broadcast, shuffle byte k/8 to
 * byte k, test bit k%8), which select the query bytes u; sad sums them. 8 instructions per
 * 32 dimensions where the plane popcounts take about 30. */
__attribute__((target("avx2"))) static void dots1_avx2(
    const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n, int64_t row0,
    const uint8_t *qpack, int32_t *out) {
    const uint8_t *u = qpack + cb * 8; /* the query bytes follow the 8 bit-planes */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128,
                                         1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    const __m256i zero = _mm256_setzero_si256();
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *c = ROW(i);
        __m256i acc0 = zero, acc1 = zero;
        int64_t m = 0;
        for (; m + 8 <= cb; m += 8) { /* 64 dimensions a step, two chains */
            int32_t w0, w1;
            memcpy(&w0, c + m, 4), memcpy(&w1, c + m + 4, 4);
            __m256i b0 = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(w0), spread), bit);
            __m256i b1 = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(w1), spread), bit);
            __m256i s0 = _mm256_and_si256(_mm256_cmpeq_epi8(b0, bit), _mm256_loadu_si256((const __m256i *)(u + m * 8)));
            __m256i s1 = _mm256_and_si256(_mm256_cmpeq_epi8(b1, bit), _mm256_loadu_si256((const __m256i *)(u + m * 8 + 32)));
            acc0 = _mm256_add_epi64(acc0, _mm256_sad_epu8(s0, zero));
            acc1 = _mm256_add_epi64(acc1, _mm256_sad_epu8(s1, zero));
        }
        __m256i acc = _mm256_add_epi64(acc0, acc1);
        __m128i s = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
        out[i] = (int32_t)_mm_cvtsi128_si64(s);
    }
}

/* nibbles split into two byte vectors matching the even / odd query bytes; maddubs takes
 * the query as unsigned and the nibble as signed bytes: 2 x 255 x 15 per int16, and the two
 * halves summed stay below 32767 */
__attribute__((target("avx2"))) static void dots4_avx2(
    const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n, int64_t row0,
    const uint8_t *qpack, int32_t *out) {
    const uint8_t *qe = qpack, *qo = qpack + cb;
    const __m256i low = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *c = ROW(i);
        __m256i acc = _mm256_setzero_si256();
        for (int64_t m = 0; m < cb; m += 32) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(c + m));
            __m256i lo = _mm256_and_si256(v, low);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            __m256i p = _mm256_add_epi16(
                _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(qe + m)), lo),
                _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(qo + m)), hi));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
        }
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
        out[i] = _mm_cvtsi128_si32(s);
    }
}

/* --------------------------------------------------------------- AVX-512 */

__attribute__((target("avx512f,avx512vpopcntdq"))) static void dots1_avx512(
    const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n, int64_t row0,
    const uint8_t *qpack, int32_t *out) {
    const int64_t W = cb / 8;
    const uint64_t *pl = (const uint64_t *)qpack;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t *c = (const uint64_t *)ROW(i);
        __m512i acc[8];
        for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_si512();
        for (int64_t w = 0; w < W; w += 8) {
            __mmask8 m = W - w >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (W - w)) - 1);
            __m512i cw = _mm512_maskz_loadu_epi64(m, c + w);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++)
                acc[j] = _mm512_add_epi64(acc[j], _mm512_popcnt_epi64(_mm512_and_si512(
                                                      cw, _mm512_maskz_loadu_epi64(m, pl + j * W + w))));
        }
        int64_t s = 0;
        for (int j = 0; j < 8; j++) s += _mm512_reduce_add_epi64(acc[j]) << j;
        out[i] = (int32_t)s;
    }
}

__attribute__((target("avx512f,avx512bw"))) static void dots4_avx512(
    const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n, int64_t row0,
    const uint8_t *qpack, int32_t *out) {
    const uint8_t *qe = qpack, *qo = qpack + cb;
    const __m512i low = _mm512_set1_epi8(15), ones = _mm512_set1_epi16(1);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *c = ROW(i);
        __m512i acc = _mm512_setzero_si512();
        for (int64_t m = 0; m < cb; m += 64) {
            /* cb is a multiple of 32: a last half block is loaded masked, its zeros add 0 */
            __mmask64 k = cb - m >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (cb - m)) - 1);
            __m512i v = _mm512_maskz_loadu_epi8(k, c + m);
            __m512i lo = _mm512_and_si512(v, low);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            __m512i p = _mm512_add_epi16(
                _mm512_maddubs_epi16(_mm512_maskz_loadu_epi8(k, qe + m), lo),
                _mm512_maddubs_epi16(_mm512_maskz_loadu_epi8(k, qo + m), hi));
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, ones));
        }
        out[i] = _mm512_reduce_add_epi32(acc);
    }
}
#endif /* RQ_X86 */

#if RQ_NEON
/* ------------------------------------------------------------------ NEON */

static void dots1_neon(const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n,
                       int64_t row0, const uint8_t *qpack, int32_t *out) {
    const int64_t W = cb / 8;
    const uint64_t *pl = (const uint64_t *)qpack;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t *c = (const uint64_t *)ROW(i);
        uint32_t cnt[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t w = 0; w < W; w += 2) { /* two words a step, one when W is odd */
            if (w + 2 <= W) {
                uint64x2_t cw = vld1q_u64(c + w);
                for (int j = 0; j < 8; j++)
                    cnt[j] += vaddvq_u8(vcntq_u8(vreinterpretq_u8_u64(vandq_u64(cw, vld1q_u64(pl + j * W + w)))));
            } else {
                uint64x1_t cw = vld1_u64(c + w);
                for (int j = 0; j < 8; j++)
                    cnt[j] += vaddv_u8(vcnt_u8(vreinterpret_u8_u64(vand_u64(cw, vld1_u64(pl + j * W + w)))));
            }
        }
        int32_t s = 0;
        for (int j = 0; j < 8; j++) s += (int32_t)cnt[j] << j;
        out[i] = s;
    }
}

/* u8 x u8 -> u16 products (<= 3825), four per lane summed (<= 15300), widened to u32 */
static void dots4_neon(const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n,
                       int64_t row0, const uint8_t *qpack, int32_t *out) {
    const uint8_t *qe = qpack, *qo = qpack + cb;
    const uint8x16_t low = vdupq_n_u8(15);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *c = ROW(i);
        uint32x4_t acc = vdupq_n_u32(0);
        for (int64_t m = 0; m < cb; m += 16) {
            uint8x16_t v = vld1q_u8(c + m);
            uint8x16_t lo = vandq_u8(v, low), hi = vshrq_n_u8(v, 4);
            uint8x16_t e = vld1q_u8(qe + m), o = vld1q_u8(qo + m);
            uint16x8_t p = vmull_u8(vget_low_u8(e), vget_low_u8(lo));
            p = vmlal_high_u8(p, e, lo);
            p = vmlal_u8(p, vget_low_u8(o), vget_low_u8(hi));
            p = vmlal_high_u8(p, o, hi);
            acc = vpadalq_u16(acc, p);
        }
        out[i] = (int32_t)vaddvq_u32(acc);
    }
}
#endif /* RQ_NEON */

/* -------------------------------------------------------------- dispatch */

hs_rq_dots_fn hs_rq_dots_impl(int bits) {
    int level = hs_simd_level();
#if RQ_X86
    if (level == HS_SIMD_AVX512) {
        __builtin_cpu_init();
        if (bits == 1 && __builtin_cpu_supports("avx512vpopcntdq")) return dots1_avx512;
        if (bits == 4 && __builtin_cpu_supports("avx512bw")) return dots4_avx512;
        level = HS_SIMD_AVX2; /* AVX-512F without the extension: AVX2 is always there */
    }
    if (level == HS_SIMD_AVX2) return bits == 1 ? dots1_avx2 : dots4_avx2;
#elif RQ_NEON
    if (level == HS_SIMD_NEON) return bits == 1 ? dots1_neon : dots4_neon;
#endif
    (void)level;
    return bits == 1 ? dots1_scalar : dots4_scalar;
}
