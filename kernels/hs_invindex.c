/* Mutable inverted index with exact BM25 top-k (MaxScore). */
#include "hs_invindex.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hs_topk.h"

typedef struct {
    int32_t *doc, *tf;
    int64_t len, cap;
    int32_t max_tf; /* never lowered: stays an upper bound after deletes */
    int32_t min_dl;
} plist;

typedef struct {
    int32_t *tid, *tf; /* the document's distinct terms */
    int32_t n;
    int32_t dl; /* 0: not indexed */
} fwd;

struct hs_inv {
    plist *terms;
    int64_t nterms;
    fwd *docs;
    int64_t ndocs_cap;
    int64_t N, total;
};

hs_inv *hs_inv_new(void) { return calloc(1, sizeof(hs_inv)); }

void hs_inv_free(hs_inv *ix) {
    if (!ix) return;
    for (int64_t t = 0; t < ix->nterms; t++) {
        free(ix->terms[t].doc);
        free(ix->terms[t].tf);
    }
    for (int64_t s = 0; s < ix->ndocs_cap; s++) {
        free(ix->docs[s].tid);
        free(ix->docs[s].tf);
    }
    free(ix->terms);
    free(ix->docs);
    free(ix);
}

static int grow_terms(hs_inv *ix, int64_t need) {
    if (need <= ix->nterms) return HS_OK;
    int64_t cap = ix->nterms ? ix->nterms : 1024;
    while (cap < need) cap *= 2;
    plist *p = realloc(ix->terms, (size_t)cap * sizeof(plist));
    if (!p) return HS_ENOMEM;
    memset(p + ix->nterms, 0, (size_t)(cap - ix->nterms) * sizeof(plist));
    for (int64_t t = ix->nterms; t < cap; t++) p[t].min_dl = INT32_MAX;
    ix->terms = p;
    ix->nterms = cap;
    return HS_OK;
}

static int grow_docs(hs_inv *ix, int64_t need) {
    if (need <= ix->ndocs_cap) return HS_OK;
    int64_t cap = ix->ndocs_cap ? ix->ndocs_cap : 1024;
    while (cap < need) cap *= 2;
    fwd *p = realloc(ix->docs, (size_t)cap * sizeof(fwd));
    if (!p) return HS_ENOMEM;
    memset(p + ix->ndocs_cap, 0, (size_t)(cap - ix->ndocs_cap) * sizeof(fwd));
    ix->docs = p;
    ix->ndocs_cap = cap;
    return HS_OK;
}

/* first index with doc[i] >= s */
static int64_t lower_bound(const int32_t *doc, int64_t lo, int64_t hi, int32_t s) {
    while (lo < hi) {
        int64_t mid = (lo + hi) >> 1;
        if (doc[mid] < s) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* first index >= pos with doc[i] >= s: exponential steps, then binary search
 * (cursors only move forward, usually by a little) */
static int64_t gallop(const int32_t *doc, int64_t pos, int64_t len, int32_t s) {
    int64_t step = 1, lo = pos, hi = pos + 1;
    while (hi < len && doc[hi] < s) {
        lo = hi;
        step *= 2;
        hi = pos + step;
    }
    if (hi > len) hi = len;
    return lower_bound(doc, lo, hi, s);
}

static int plist_insert(plist *p, int32_t s, int32_t tf, int32_t dl) {
    if (p->len == p->cap) {
        int64_t cap = p->cap ? p->cap * 2 : 4;
        int32_t *d = realloc(p->doc, (size_t)cap * sizeof(int32_t));
        if (!d) return HS_ENOMEM;
        p->doc = d;
        int32_t *f = realloc(p->tf, (size_t)cap * sizeof(int32_t));
        if (!f) return HS_ENOMEM;
        p->tf = f;
        p->cap = cap;
    }
    int64_t i = (p->len == 0 || p->doc[p->len - 1] < s) ? p->len : lower_bound(p->doc, 0, p->len, s);
    memmove(p->doc + i + 1, p->doc + i, (size_t)(p->len - i) * sizeof(int32_t));
    memmove(p->tf + i + 1, p->tf + i, (size_t)(p->len - i) * sizeof(int32_t));
    p->doc[i] = s;
    p->tf[i] = tf;
    p->len++;
    if (tf > p->max_tf) p->max_tf = tf;
    if (dl < p->min_dl) p->min_dl = dl;
    return HS_OK;
}

static void plist_delete(plist *p, int32_t s) {
    int64_t i = lower_bound(p->doc, 0, p->len, s);
    if (i >= p->len || p->doc[i] != s) return;
    memmove(p->doc + i, p->doc + i + 1, (size_t)(p->len - i - 1) * sizeof(int32_t));
    memmove(p->tf + i, p->tf + i + 1, (size_t)(p->len - i - 1) * sizeof(int32_t));
    p->len--;
}

static void remove_one(hs_inv *ix, int64_t s) {
    if (s < 0 || s >= ix->ndocs_cap || ix->docs[s].dl == 0) return;
    fwd *f = &ix->docs[s];
    for (int32_t j = 0; j < f->n; j++) plist_delete(&ix->terms[f->tid[j]], (int32_t)s);
    ix->N--;
    ix->total -= f->dl;
    free(f->tid);
    free(f->tf);
    memset(f, 0, sizeof(*f));
}

int hs_inv_remove(hs_inv *ix, const int64_t *slots, int64_t n) {
    for (int64_t i = 0; i < n; i++) remove_one(ix, slots[i]);
    return HS_OK;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int hs_inv_add(hs_inv *ix, const int64_t *slots, int64_t n, const int32_t *tids, const int64_t *offs) {
    int64_t maxs = -1, maxt = -1;
    for (int64_t i = 0; i < n; i++) {
        if (slots[i] < 0 || slots[i] > INT32_MAX || offs[i] > offs[i + 1]) return HS_EINVAL;
        if (slots[i] > maxs) maxs = slots[i];
        for (int64_t j = offs[i]; j < offs[i + 1]; j++) {
            if (tids[j] < 0) return HS_EINVAL;
            if (tids[j] > maxt) maxt = tids[j];
        }
    }
    if (grow_docs(ix, maxs + 1) || grow_terms(ix, maxt + 1)) return HS_ENOMEM;
    int32_t *buf = NULL;
    int64_t bufcap = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = slots[i], m = offs[i + 1] - offs[i];
        remove_one(ix, s);
        if (m == 0) continue;
        if (m > bufcap) {
            int32_t *nb = realloc(buf, (size_t)m * sizeof(int32_t));
            if (!nb) {
                free(buf);
                return HS_ENOMEM;
            }
            buf = nb;
            bufcap = m;
        }
        memcpy(buf, tids + offs[i], (size_t)m * sizeof(int32_t));
        qsort(buf, (size_t)m, sizeof(int32_t), cmp_i32);
        int64_t distinct = 1;
        for (int64_t j = 1; j < m; j++) distinct += buf[j] != buf[j - 1];
        fwd *f = &ix->docs[s];
        f->tid = malloc((size_t)distinct * sizeof(int32_t));
        f->tf = malloc((size_t)distinct * sizeof(int32_t));
        if (!f->tid || !f->tf) {
            free(f->tid);
            free(f->tf);
            memset(f, 0, sizeof(*f));
            free(buf);
            return HS_ENOMEM;
        }
        int32_t c = 0;
        for (int64_t j = 0; j < m; j++) {
            if (j == 0 || buf[j] != buf[j - 1]) {
                f->tid[c] = buf[j];
                f->tf[c] = 0;
                c++;
            }
            f->tf[c - 1]++;
        }
        f->n = c;
        f->dl = (int32_t)m;
        for (int32_t j = 0; j < c; j++) {
            if (plist_insert(&ix->terms[f->tid[j]], (int32_t)s, f->tf[j], f->dl)) {
                free(buf);
                return HS_ENOMEM;
            }
        }
        ix->N++;
        ix->total += m;
    }
    free(buf);
    return HS_OK;
}

/* ------------------------------------------------------------------ search */

typedef struct {
    const plist *p;
    double idf_w; /* idf * query weight */
    double ub;    /* upper bound of the term's score */
    int64_t pos;
} cursor;

static inline double term_score(double idf_w, int32_t tf, int32_t dl, double k1, double b, double avgdl) {
    return idf_w * tf / (tf + k1 * (1.0 - b + b * dl / avgdl));
}

static inline int allowed(const uint64_t *bits, int64_t nbits, int32_t s) {
    if (!bits) return 1;
    return s < nbits && ((bits[s >> 6] >> (s & 63)) & 1);
}

static int cmp_ub(const void *a, const void *b) {
    const cursor *x = a, *y = b;
    return (x->ub > y->ub) - (x->ub < y->ub);
}

/* merges repeated query terms into one cursor each; returns the count */
static int64_t make_cursors(const hs_inv *ix, const int32_t *qt, const float *qw, int64_t nq, double k1,
                            double b, cursor *cur) {
    double N = (double)ix->N, avgdl = ix->N ? (double)ix->total / ix->N : 1.0;
    int64_t m = 0;
    for (int64_t i = 0; i < nq; i++) {
        if (qt[i] < 0 || qt[i] >= ix->nterms || ix->terms[qt[i]].len == 0) continue;
        int64_t j = 0;
        while (j < m && cur[j].p != &ix->terms[qt[i]]) j++;
        const plist *p = &ix->terms[qt[i]];
        double n = (double)p->len;
        double idf = log(1.0 + (N - n + 0.5) / (n + 0.5));
        if (j == m) {
            cur[m].p = p;
            cur[m].idf_w = 0.0;
            cur[m].pos = 0;
            m++;
        }
        cur[j].idf_w += idf * qw[i];
    }
    for (int64_t j = 0; j < m; j++)
        cur[j].ub = term_score(cur[j].idf_w, cur[j].p->max_tf, cur[j].p->min_dl, k1, b, avgdl);
    return m;
}

int64_t hs_inv_search(const hs_inv *ix, const int32_t *qt, const float *qw, int64_t nq, int64_t k,
                      float k1f, float bf, const uint64_t *bits, int64_t nbits, int exhaustive,
                      float *out_score, int64_t *out_slot) {
    for (int64_t i = 0; i < k; i++) {
        out_score[i] = -INFINITY;
        out_slot[i] = -1;
    }
    if (k <= 0 || nq <= 0 || ix->N == 0) return 0;
    double k1 = k1f, b = bf, avgdl = (double)ix->total / ix->N;
    cursor *cur = malloc((size_t)nq * sizeof(cursor));
    double *prefix = malloc((size_t)(nq + 1) * sizeof(double));
    if (!cur || !prefix) {
        free(cur);
        free(prefix);
        return -HS_ENOMEM;
    }
    int64_t m = make_cursors(ix, qt, qw, nq, k1, b, cur);
    hs_heap h;
    hs_heap_init(&h, out_score, out_slot, k);
    if (exhaustive) {
        /* the reference: every posting of every term, accumulated per slot */
        double *acc = calloc((size_t)ix->ndocs_cap, sizeof(double));
        uint8_t *seen = calloc((size_t)ix->ndocs_cap, 1);
        if (!acc || !seen) {
            free(acc);
            free(seen);
            free(cur);
            free(prefix);
            return -HS_ENOMEM;
        }
        for (int64_t j = 0; j < m; j++) {
            const plist *p = cur[j].p;
            for (int64_t i = 0; i < p->len; i++) {
                int32_t s = p->doc[i];
                acc[s] += term_score(cur[j].idf_w, p->tf[i], ix->docs[s].dl, k1, b, avgdl);
                seen[s] = 1;
            }
        }
        for (int64_t s = 0; s < ix->ndocs_cap; s++)
            if (seen[s] && allowed(bits, nbits, (int32_t)s)) hs_heap_push(&h, (float)acc[s], s);
        free(acc);
        free(seen);
    } else {
        /* MaxScore: terms by ascending upper bound; the "non-essential" prefix
         * (bounds summing below the heap threshold) only scores documents that
         * the essential terms found and that can still enter the top-k */
        qsort(cur, (size_t)m, sizeof(cursor), cmp_ub);
        prefix[0] = 0.0;
        for (int64_t j = 0; j < m; j++) prefix[j + 1] = prefix[j] + cur[j].ub;
        int64_t e = 0; /* cur[0..e) are non-essential */
        for (;;) {
            double theta = h.size < k ? -INFINITY : (double)h.score[0];
            /* a margin for float rounding: never drop a document that could tie */
            while (e < m && prefix[e + 1] * (1.0 + 1e-9) < theta) e++;
            if (e == m) break;
            int32_t doc = INT32_MAX;
            for (int64_t j = e; j < m; j++)
                if (cur[j].pos < cur[j].p->len && cur[j].p->doc[cur[j].pos] < doc) doc = cur[j].p->doc[cur[j].pos];
            if (doc == INT32_MAX) break;
            int ok = allowed(bits, nbits, doc);
            double score = 0.0;
            int32_t dl = ix->docs[doc].dl;
            for (int64_t j = e; j < m; j++) {
                const plist *p = cur[j].p;
                if (cur[j].pos < p->len && p->doc[cur[j].pos] == doc) {
                    if (ok) score += term_score(cur[j].idf_w, p->tf[cur[j].pos], dl, k1, b, avgdl);
                    cur[j].pos++;
                }
            }
            if (!ok) continue;
            for (int64_t j = e - 1; j >= 0; j--) {
                if ((score + prefix[j + 1]) * (1.0 + 1e-9) < theta) {
                    score = -INFINITY;
                    break;
                }
                const plist *p = cur[j].p;
                int64_t pos = cur[j].pos;
                if (pos < p->len && p->doc[pos] < doc) pos = gallop(p->doc, pos, p->len, doc);
                cur[j].pos = pos;
                if (pos < p->len && p->doc[pos] == doc)
                    score += term_score(cur[j].idf_w, p->tf[pos], dl, k1, b, avgdl);
            }
            if (score > -INFINITY) hs_heap_push(&h, (float)score, doc);
        }
    }
    free(cur);
    free(prefix);
    return hs_heap_finish(&h);
}

int hs_inv_score(const hs_inv *ix, const int32_t *qt, const float *qw, int64_t nq, float k1, float b,
                 const int64_t *slots, int64_t n, float *out) {
    double avgdl = ix->N ? (double)ix->total / ix->N : 1.0, N = (double)ix->N;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = slots[i];
        double score = 0.0;
        if (s >= 0 && s < ix->ndocs_cap && ix->docs[s].dl) {
            const fwd *f = &ix->docs[s];
            for (int64_t j = 0; j < nq; j++) {
                int32_t t = qt[j];
                if (t < 0 || t >= ix->nterms) continue;
                /* the document's terms are sorted: binary search */
                int64_t lo = 0, hi = f->n;
                while (lo < hi) {
                    int64_t mid = (lo + hi) >> 1;
                    if (f->tid[mid] < t) lo = mid + 1;
                    else hi = mid;
                }
                if (lo < f->n && f->tid[lo] == t) {
                    double nn = (double)ix->terms[t].len;
                    double idf = log(1.0 + (N - nn + 0.5) / (nn + 0.5));
                    score += term_score(idf * qw[j], f->tf[lo], f->dl, k1, b, avgdl);
                }
            }
        }
        out[i] = (float)score;
    }
    return HS_OK;
}

int64_t hs_inv_matches(const hs_inv *ix, const int32_t *qt, int64_t nq, const uint64_t *bits,
                       int64_t nbits, int64_t *out, int64_t cap, int64_t *total) {
    uint8_t *seen = calloc((size_t)(ix->ndocs_cap + 1), 1);
    if (!seen) return -HS_ENOMEM;
    for (int64_t i = 0; i < nq; i++) {
        if (qt[i] < 0 || qt[i] >= ix->nterms) continue;
        const plist *p = &ix->terms[qt[i]];
        for (int64_t j = 0; j < p->len; j++) seen[p->doc[j]] = 1;
    }
    int64_t w = 0, t = 0;
    for (int64_t s = 0; s < ix->ndocs_cap; s++) {
        if (!seen[s] || !allowed(bits, nbits, (int32_t)s)) continue;
        if (w < cap) out[w++] = s;
        t++;
    }
    free(seen);
    if (total) *total = t;
    return w;
}

int64_t hs_inv_docs(const hs_inv *ix) { return ix->N; }
int64_t hs_inv_df(const hs_inv *ix, int32_t t) { return t >= 0 && t < ix->nterms ? ix->terms[t].len : 0; }
int64_t hs_inv_total_len(const hs_inv *ix) { return ix->total; }

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t hs_inv_search_best(const hs_inv *const *ix, int64_t nf, const int32_t *const *qt,
                           const float *const *qw, const int64_t *nq, int64_t k, float k1, float b,
                           const uint64_t *bits, int64_t nbits, float *out_score, int64_t *out_slot) {
    for (int64_t i = 0; i < k; i++) {
        out_score[i] = -INFINITY;
        out_slot[i] = -1;
    }
    if (k <= 0 || nf <= 0) return 0;
    int64_t cap = nf * k;
    int64_t *cand = malloc((size_t)cap * sizeof(int64_t));
    float *part = malloc((size_t)(cap > k ? cap : k) * sizeof(float));
    float *best = malloc((size_t)cap * sizeof(float));
    if (!cand || !part || !best) {
        free(cand);
        free(part);
        free(best);
        return -HS_ENOMEM;
    }
    /* the union of every field's exact top-k holds the best-field top-k (see lexical.py) */
    int64_t n = 0, rc = 0;
    for (int64_t f = 0; f < nf && rc >= 0; f++) {
        if (nq[f] <= 0) continue;
        rc = hs_inv_search(ix[f], qt[f], qw[f], nq[f], k, k1, b, bits, nbits, 0, part, cand + n);
        if (rc > 0) n += rc;
    }
    if (rc >= 0 && n > 0) {
        qsort(cand, (size_t)n, sizeof(int64_t), cmp_i64);
        int64_t u = 0;
        for (int64_t i = 0; i < n; i++)
            if (u == 0 || cand[i] != cand[u - 1]) cand[u++] = cand[i];
        n = u;
        for (int64_t i = 0; i < n; i++) best[i] = 0.0f;
        /* every candidate re-scored in every field, its best field kept */
        for (int64_t f = 0; f < nf; f++) {
            if (nq[f] <= 0) continue;
            hs_inv_score(ix[f], qt[f], qw[f], nq[f], k1, b, cand, n, part);
            for (int64_t i = 0; i < n; i++)
                if (part[i] > best[i]) best[i] = part[i];
        }
        hs_heap h;
        hs_heap_init(&h, out_score, out_slot, k);
        for (int64_t i = 0; i < n; i++) hs_heap_push(&h, best[i], cand[i]);
        rc = hs_heap_finish(&h);
    }
    free(cand);
    free(part);
    free(best);
    return rc < 0 ? rc : (n > 0 ? rc : 0);
}

int64_t hs_inv_nbytes(const hs_inv *ix) {
    int64_t b = ix->nterms * (int64_t)sizeof(plist) + ix->ndocs_cap * (int64_t)sizeof(fwd);
    for (int64_t t = 0; t < ix->nterms; t++) b += ix->terms[t].cap * 8;
    for (int64_t i = 0; i < ix->ndocs_cap; i++) b += (int64_t)ix->docs[i].n * 8;
    return b;
}
