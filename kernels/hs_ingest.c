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
    /* open addressing, at most half full: slot holds 1 + the group's first row, 0 when free */
    int64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    int64_t *table = calloc((size_t)cap, sizeof(int64_t));
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
            int64_t e = table[k];
            if (e == 0) { /* a new string */
                table[k] = i + 1;
                first[groups] = last[groups] = i;
                group[i] = (int32_t)groups++;
                break;
            }
            int64_t j = e - 1;
            if ((uint64_t)hash[j] == h && len[j] == l && (l == 0 || memcmp(data + start[j], p, (size_t)l) == 0)) {
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
