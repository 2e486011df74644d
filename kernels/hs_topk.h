/* Bounded top-k selection as a min-heap over parallel score[] / id[] arrays.
 *
 * "Better" means a higher score; equal scores prefer the lower id, so results
 * are deterministic whatever order candidates arrive in.
 */
#ifndef HS_TOPK_H
#define HS_TOPK_H

#include <math.h>
#include "hs_common.h"

typedef struct {
    float *score;  /* k slots; the root (index 0) is the worst kept */
    int64_t *id;
    int64_t k;
    int64_t size;
} hs_heap;

static inline int hs_worse(float sa, int64_t ia, float sb, int64_t ib) {
    return sa < sb || (sa == sb && ia > ib);
}

static inline void hs_heap_init(hs_heap *h, float *score, int64_t *id, int64_t k) {
    h->score = score;
    h->id = id;
    h->k = k;
    h->size = 0;
}

/* Lowest score that could still enter the heap (-inf while it is not full). */
static inline float hs_heap_threshold(const hs_heap *h) {
    return h->size < h->k ? -INFINITY : h->score[0];
}

static inline void hs_heap_sift_down(hs_heap *h, int64_t i) {
    float s = h->score[i];
    int64_t id = h->id[i];
    int64_t n = h->size;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && hs_worse(h->score[c + 1], h->id[c + 1], h->score[c], h->id[c])) c++;
        if (!hs_worse(h->score[c], h->id[c], s, id)) break;
        h->score[i] = h->score[c];
        h->id[i] = h->id[c];
        i = c;
    }
    h->score[i] = s;
    h->id[i] = id;
}

static inline void hs_heap_push(hs_heap *h, float s, int64_t id) {
    if (h->size < h->k) {
        int64_t i = h->size++;
        while (i > 0) {
            int64_t p = (i - 1) / 2;
            if (!hs_worse(s, id, h->score[p], h->id[p])) break;
            h->score[i] = h->score[p];
            h->id[i] = h->id[p];
            i = p;
        }
        h->score[i] = s;
        h->id[i] = id;
    } else if (h->k > 0 && hs_worse(h->score[0], h->id[0], s, id)) {
        h->score[0] = s;
        h->id[0] = id;
        hs_heap_sift_down(h, 0);
    }
}

/* Sorts the kept entries best-first into the same arrays and pads the unused
 * slots with (-inf, -1). Returns the number of kept entries. */
int64_t hs_heap_finish(hs_heap *h);

/* Exact top-k of n scores (ids = index) into out arrays of length k. */
int64_t hs_topk_f32(const float *scores, int64_t n, int64_t k, float *out_score,
                    int64_t *out_id);


/* KTH_PUSH(name, T) defines `static void name(T *h, int64_t *n, int64_t k, T v)`: a max-heap of
 * the k smallest values seen (the k-th smallest on top, h[0]), for the scans on codes that keep
 * the k-th smallest upper end of a distance (float in hs_hnsw.c, double in hs_rabitq.c). */
#define HS_DEFINE_KTH_PUSH(name, T)                                                            \
    static void name(T *h, int64_t *n, int64_t k, T v) {                                      \
        int64_t i;                                                                             \
        if (*n < k) {                                                                          \
            i = (*n)++;                                                                        \
            while (i > 0 && h[(i - 1) / 2] < v) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }    \
            h[i] = v;                                                                          \
            return;                                                                            \
        }                                                                                      \
        if (v >= h[0]) return;                                                                 \
        i = 0;                                                                                 \
        for (;;) {                                                                             \
            int64_t c = 2 * i + 1;                                                             \
            if (c >= k) break;                                                                 \
            if (c + 1 < k && h[c + 1] > h[c]) c++;                                             \
            if (h[c] <= v) break;                                                              \
            h[i] = h[c];                                                                       \
            i = c;                                                                             \
        }                                                                                      \
        h[i] = v;                                                                              \
    }

#endif
