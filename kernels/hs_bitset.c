#include "hs_bitset.h"

int64_t hs_bitset_popcount(const uint64_t *b, int64_t nwords) {
    int64_t c = 0;
    for (int64_t i = 0; i < nwords; i++) c += __builtin_popcountll(b[i]);
    return c;
}

void hs_bitset_and(uint64_t *dst, const uint64_t *src, int64_t nwords) {
    for (int64_t i = 0; i < nwords; i++) dst[i] &= src[i];
}

void hs_bitset_or(uint64_t *dst, const uint64_t *src, int64_t nwords) {
    for (int64_t i = 0; i < nwords; i++) dst[i] |= src[i];
}

void hs_bitset_not(uint64_t *dst, int64_t nwords) {
    for (int64_t i = 0; i < nwords; i++) dst[i] = ~dst[i];
}

void hs_bitset_clear_tail(uint64_t *b, int64_t n) {
    if (n & 63) b[n >> 6] &= (((uint64_t)1) << (n & 63)) - 1u;
}

int64_t hs_bitset_to_indices(const uint64_t *b, int64_t nwords, int64_t limit, int64_t *out) {
    int64_t c = 0;
    for (int64_t w = 0; w < nwords && c < limit; w++) {
        uint64_t x = b[w];
        while (x && c < limit) {
            out[c++] = w * 64 + __builtin_ctzll(x);
            x &= x - 1;
        }
    }
    return c;
}
