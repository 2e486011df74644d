/* Filter bitsets: one bit per row, 64 rows per uint64 word, little-endian bit order. */
#ifndef HS_BITSET_H
#define HS_BITSET_H

#include "hs_common.h"

#define HS_WORDS(n) (((n) + 63) / 64)

static inline int hs_bit(const uint64_t *b, int64_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1u); }

int64_t hs_bitset_popcount(const uint64_t *b, int64_t nwords);
void hs_bitset_and(uint64_t *dst, const uint64_t *src, int64_t nwords);
void hs_bitset_or(uint64_t *dst, const uint64_t *src, int64_t nwords);
void hs_bitset_not(uint64_t *dst, int64_t nwords);
/* Clears the bits at positions >= n in the last word. */
void hs_bitset_clear_tail(uint64_t *b, int64_t n);
/* Writes the positions of set bits in ascending order, at most `limit`; returns the count. */
int64_t hs_bitset_to_indices(const uint64_t *b, int64_t nwords, int64_t limit, int64_t *out);

#endif
