/* Stable 64-bit string hash: 8-byte words folded through a multiply-xorshift mix. */
#include "hs_hash.h"

#include <string.h>

#define K1 0x9E3779B97F4A7C15ULL
#define K2 0xBF58476D1CE4E5B9ULL
#define K3 0x94D049BB133111EBULL

static inline uint64_t mix(uint64_t z) { /* splitmix64's finaliser: every bit reaches every bit */
    z = (z ^ (z >> 30)) * K2;
    z = (z ^ (z >> 27)) * K3;
    return z ^ (z >> 31);
}

static inline uint64_t load64(const uint8_t *p) { /* little-endian on every host */
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

uint64_t hs_hash_bytes(const uint8_t *p, int64_t n) {
    uint64_t h = K1 ^ ((uint64_t)n * K3);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) h = mix(h ^ load64(p + i)) + K1;
    uint64_t tail = 0;
    for (int64_t j = n - 1; j >= i; j--) tail = (tail << 8) | p[j];
    return mix(h ^ tail ^ ((uint64_t)(n - i) << 59));
}

int hs_hash_spans(const uint8_t *data, int64_t size, const int64_t *start, const int32_t *len,
                  int64_t n, int64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t s = start[i], l = len[i] < 0 ? 0 : len[i];
        if (len[i] < -1 || (l > 0 && (s < 0 || s > size || l > size - s))) return HS_EINVAL;
        if (l == 0) s = 0;  /* an empty span's offset is never read */
        out[i] = (int64_t)hs_hash_bytes(data + s, l);
    }
    return HS_OK;
}
