#include "hs_topk.h"

int64_t hs_heap_finish(hs_heap *h) {
    int64_t kept = h->size;
    /* heapsort: repeatedly move the worst to the end -> best-first order */
    while (h->size > 1) {
        int64_t last = h->size - 1;
        float s = h->score[0];
        int64_t id = h->id[0];
        h->score[0] = h->score[last];
        h->id[0] = h->id[last];
        h->score[last] = s;
        h->id[last] = id;
        h->size--;
        hs_heap_sift_down(h, 0);
    }
    for (int64_t i = kept; i < h->k; i++) {
        h->score[i] = -INFINITY;
        h->id[i] = -1;
    }
    h->size = kept;
    return kept;
}

int64_t hs_topk_f32(const float *scores, int64_t n, int64_t k, float *out_score,
                    int64_t *out_id) {
    hs_heap h;
    hs_heap_init(&h, out_score, out_id, k);
    for (int64_t i = 0; i < n; i++) {
        if (scores[i] >= hs_heap_threshold(&h)) hs_heap_push(&h, scores[i], i);
    }
    return hs_heap_finish(&h);
}
