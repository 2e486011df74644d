/* The integer code products of hs_rabitq.c, one variant per SIMD level (internal).
 *
 * The query is quantised to 8-bit unsigned levels u (0..255); every variant computes the
 * same exact integer, so the levels agree bit for bit:
 *   1 bit:  S = sum of u_i over the set bits of the code. qpack holds 8 bit-planes of u,
 *           plane j = dp/64 uint64 words (bit i of plane j = bit j of u_i), then u itself
 *           (dp bytes, for the variants that select bytes instead of counting bits).
 *   4 bits: S = sum of u_i * c_i over the nibbles c of the code (byte m = c_2m | c_2m+1 << 4).
 *           qpack holds u at the even dimensions (dp/2 bytes), then at the odd ones.
 * Codes are cb bytes long and rows are rs (>= cb) bytes apart; rows[i] (or row0 + i when rows is NULL) are scored. */
#ifndef HS_RABITQ_KERN_H
#define HS_RABITQ_KERN_H

#include "hs_common.h"

typedef void (*hs_rq_dots_fn)(const uint8_t *codes, int64_t cb, int64_t rs, const int64_t *rows, int64_t n,
                              int64_t row0, const uint8_t *qpack, int32_t *out);

/* The variant of the SIMD level in use (hs_simd_level): AVX-512 needs VPOPCNTDQ (1 bit) or
 * BW (4 bits) beside AVX-512F, else the AVX2 variant runs. */
hs_rq_dots_fn hs_rq_dots_impl(int bits);

#endif
