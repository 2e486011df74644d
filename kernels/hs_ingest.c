/* Ingest builders (see hs_ingest.h): one pass per batch instead of one Python call per row. */
#include "hs_ingest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hs_hash.h"

static int span_ok(int64_t s, int32_t l, int64_t size) {
    return l == -1 || l == 0 || (l > 0 && s >= 0 && s <= size && l <= size - s);
}

int64_t hs_group_spans(const uint8_t *data, int64_t size, const int64_t *start, const int32_t *len,
                       int64_t n, int64_t *hash, int32_t *group, int64_t *first, int64_t *last) {
    static const uint8_t none = 0;
    for (int64_t i = 0; i < n; i++)
        if (len[i] < -1 || !span_ok(start[i], len[i], size)) return HS_EINVAL;
    if (n > INT32_MAX) return HS_EINVAL;
    /* open addressing, at most half full; an entry keeps its hash beside the row, so a probe
     * reads one cache line (1 + the group's first row; 0 when free) */
    typedef struct { uint64_t h; int64_t row; } entry;
    int64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    entry *table = calloc((size_t)cap, sizeof(entry));
    if (!table) return HS_ENOMEM;
    int64_t groups = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t l = len[i] < 0 ? 0 : len[i];
        const uint8_t *p = l ? data + start[i] : &none;
        uint64_t h = hs_hash_bytes(p, l);
        hash[i] = (int64_t)h;
        if (len[i] < 0) {
            group[i] = -1;
            continue;
        }
        int64_t k = (int64_t)(h & (uint64_t)(cap - 1));
        for (;;) {
            entry *e = &table[k];
            if (e->row == 0) { /* a new string */
                e->h = h;
                e->row = i + 1;
                first[groups] = last[groups] = i;
                group[i] = (int32_t)groups++;
                break;
            }
            int64_t j = e->row - 1;
            if (e->h == h && len[j] == l && (l == 0 || memcmp(data + start[j], p, (size_t)l) == 0)) {
                int32_t g = group[j];
                group[i] = g;
                last[g] = i;
                break;
            }
            k = (k + 1) & (cap - 1);
        }
    }
    free(table);
    return groups;
}

int hs_spans_equal(const uint8_t *a, int64_t asize, const int64_t *astart, const int32_t *alen,
                   const uint8_t *b, int64_t bsize, const int64_t *bstart, const int32_t *blen,
                   int64_t n, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) {
        if (!span_ok(astart[i], alen[i], asize) || !span_ok(bstart[i], blen[i], bsize)) return HS_EINVAL;
        if (alen[i] != blen[i]) out[i] = 0;
        else if (alen[i] <= 0) out[i] = 1;
        else out[i] = memcmp(a + astart[i], b + bstart[i], (size_t)alen[i]) == 0;
    }
    return HS_OK;
}

int64_t hs_rows_norm2(const float *x, int64_t n, int64_t d, double *norm2) {
    int64_t bad = -1;
    for (int64_t r = 0; r < n; r++) {
        const float *row = x + r * d;
        /* four accumulators: independent adds the compiler can keep in flight together */
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int64_t j = 0;
        for (; j + 4 <= d; j += 4) {
            s0 += (double)row[j] * row[j];
            s1 += (double)row[j + 1] * row[j + 1];
            s2 += (double)row[j + 2] * row[j + 2];
            s3 += (double)row[j + 3] * row[j + 3];
        }
        for (; j < d; j++) s0 += (double)row[j] * row[j];
        double s = (s0 + s1) + (s2 + s3);
        norm2[r] = s;
        /* a NaN or an inf anywhere in the row makes the sum NaN or inf: one test per row */
        if (bad < 0 && !isfinite(s)) bad = r;
    }
    return bad;
}

#define RADIX_BITS 11
#define RADIX_SIZE (1 << RADIX_BITS)
#define RADIX_PASSES 6 /* 6 x 11 bits cover 64 */

int hs_sort_pairs(int64_t *keys, int64_t *vals, int64_t n) {
    if (n < 2) return HS_OK;
    uint64_t *k0 = (uint64_t *)keys, *k1 = malloc((size_t)n * sizeof(uint64_t));
    int64_t *v0 = vals, *v1 = malloc((size_t)n * sizeof(int64_t));
    int64_t *count = calloc((size_t)RADIX_PASSES * RADIX_SIZE, sizeof(int64_t));
    if (!k1 || !v1 || !count) {
        free(k1), free(v1), free(count);
        return HS_ENOMEM;
    }
    /* signed order: flipping the sign bit makes it the unsigned order; one pass counts every digit */
    const uint64_t flip = 1ULL << 63;
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = k0[i] ^ flip;
        for (int p = 0; p < RADIX_PASSES; p++) count[p * RADIX_SIZE + ((u >> (p * RADIX_BITS)) & (RADIX_SIZE - 1))]++;
    }
    int swapped = 0;
    for (int p = 0; p < RADIX_PASSES; p++) {
        int64_t *c = count + p * RADIX_SIZE;
        int shift = p * RADIX_BITS;
        int64_t sum = 0, skip = 0;
        for (int b = 0; b < RADIX_SIZE; b++) {
            if (c[b] == n) skip = 1; /* every key has this digit: the pass would not move anything */
            int64_t t = c[b];
            c[b] = sum;
            sum += t;
        }
        if (skip) continue;
        for (int64_t i = 0; i < n; i++) {
            uint64_t u = k0[i] ^ flip;
            int64_t at = c[(u >> shift) & (RADIX_SIZE - 1)]++;
            k1[at] = k0[i];
            v1[at] = v0[i];
        }
        uint64_t *tk = k0; k0 = k1; k1 = tk;
        int64_t *tv = v0; v0 = v1; v1 = tv;
        swapped ^= 1;
    }
    if (swapped) { /* the result lies in the scratch arrays: copy it home */
        memcpy(keys, k0, (size_t)n * sizeof(int64_t));
        memcpy(vals, v0, (size_t)n * sizeof(int64_t));
        free(k0), free(v0);
    } else {
        free(k1), free(v1);
    }
    free(count);
    return HS_OK;
}
