/* Searching an ascending int32 array of document numbers: the cursor moves of the inverted
 * indexes (BM25 postings, sparse-vector postings). Header-only so both inline it. */
#ifndef HS_GALLOP_H
#define HS_GALLOP_H

#include <stdint.h>

/* first index in [lo, hi) with doc[i] >= s */
static inline int64_t hs_lower_bound(const int32_t *doc, int64_t lo, int64_t hi, int64_t s) {
    while (lo < hi) {
        int64_t mid = (lo + hi) >> 1;
        if (doc[mid] < s) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* first index >= pos with doc[i] >= s: exponential steps, then binary search (cursors only
 * move forward, usually by a little) */
static inline int64_t hs_gallop(const int32_t *doc, int64_t pos, int64_t len, int64_t s) {
    int64_t step = 1, lo = pos, hi = pos + 1;
    while (hi < len && doc[hi] < s) {
        lo = hi;
        step *= 2;
        hi = pos + step;
    }
    if (hi > len) hi = len;
    return hs_lower_bound(doc, lo, hi, s);
}

#endif
