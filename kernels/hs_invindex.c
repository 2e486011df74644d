/* Mutable inverted index with exact BM25 top-k (MaxScore). */
#include "hs_invindex.h"
#include "hs_invindex_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hs_topk.h"

/* Copy-on-first-write: moves a borrowed posting list into malloc'd memory with
 * room for cap entries (>= len), so the caller's arrays are never written. */
static int plist_own(plist *p, int64_t cap) {
    if (!plist_borrowed(p)) return HS_OK;
    if (cap < 4) cap = 4;
    int32_t *d = malloc((size_t)cap * sizeof(int32_t));
    int32_t *f = malloc((size_t)cap * sizeof(int32_t));
    if (!d || !f) {
        free(d);
        free(f);
        return HS_ENOMEM;
    }
    memcpy(d, p->doc, (size_t)p->len * sizeof(int32_t));
    memcpy(f, p->tf, (size_t)p->len * sizeof(int32_t));
    p->doc = d;
    p->tf = f;
    p->cap = cap;
    return HS_OK;
}

hs_inv *hs_inv_new(void) { return calloc(1, sizeof(hs_inv)); }

void hs_inv_free(hs_inv *ix) {
    if (!ix) return;
    for (int64_t t = 0; t < ix->nterms; t++) {
        if (plist_borrowed(&ix->terms[t])) continue;
        free(ix->terms[t].doc);
        free(ix->terms[t].tf);
    }
    for (int64_t s = 0; s < ix->ndocs_cap; s++) {
        if (fwd_borrowed(ix, &ix->docs[s])) continue;
        free(ix->docs[s].tid); /* the whole block: tid, tf and positions */
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

static int plist_insert(plist *p, int32_t s, int32_t tf, int32_t dl) {
    /* a borrowed list is full by definition: copy it with the usual doubling */
    if (plist_own(p, p->len * 2)) return HS_ENOMEM;
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
    int64_t i = (p->len == 0 || p->doc[p->len - 1] < s) ? p->len : hs_lower_bound(p->doc, 0, p->len, s);
    memmove(p->doc + i + 1, p->doc + i, (size_t)(p->len - i) * sizeof(int32_t));
    memmove(p->tf + i + 1, p->tf + i, (size_t)(p->len - i) * sizeof(int32_t));
    p->doc[i] = s;
    p->tf[i] = tf;
    p->len++;
    if (tf > p->max_tf) p->max_tf = tf;
    if (dl < p->min_dl) p->min_dl = dl;
    return HS_OK;
}

/* the caller made p owned (plist_own) if it holds s */
static void plist_delete(plist *p, int32_t s) {
    int64_t i = hs_lower_bound(p->doc, 0, p->len, s);
    if (i >= p->len || p->doc[i] != s) return;
    memmove(p->doc + i, p->doc + i + 1, (size_t)(p->len - i - 1) * sizeof(int32_t));
    memmove(p->tf + i, p->tf + i + 1, (size_t)(p->len - i - 1) * sizeof(int32_t));
    p->len--;
}

static int remove_one(hs_inv *ix, int64_t s) {
    if (s < 0 || s >= ix->ndocs_cap || ix->docs[s].dl == 0) return HS_OK;
    fwd *f = &ix->docs[s];
    /* every copy first, so running out of memory leaves the document fully indexed
     * (an owned copy is as good as the borrowed list it replaced) */
    for (int32_t j = 0; j < f->n; j++)
        if (plist_own(&ix->terms[f->tid[j]], ix->terms[f->tid[j]].len)) return HS_ENOMEM;
    for (int32_t j = 0; j < f->n; j++) plist_delete(&ix->terms[f->tid[j]], (int32_t)s);
    ix->N--;
    ix->total -= f->dl;
    if (!fwd_borrowed(ix, f)) free(f->tid);
    memset(f, 0, sizeof(*f));
    return HS_OK;
}

int hs_inv_remove(hs_inv *ix, const int64_t *slots, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (remove_one(ix, slots[i])) return HS_ENOMEM;
    return HS_OK;
}

/* Sorts a document's (term, position) keys in place: insertion sort for short runs, an
 * inlined quicksort (median of three) above that. qsort's call through a pointer per compare
 * cost more than the rest of hs_inv_add on 40-word descriptions. */
static void sort_u64(uint64_t *v, int64_t n) {
    while (n > 24) {
        uint64_t a = v[0], b = v[n / 2], c = v[n - 1];
        uint64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = 0, j = n - 1;
        for (;;) { /* Hoare partition: v[0 .. j] <= pivot <= v[j+1 .. n) */
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i >= j) break;
            uint64_t t = v[i];
            v[i++] = v[j];
            v[j--] = t;
        }
        /* recurse into the smaller side, loop on the larger: O(log n) stack */
        if (j + 1 < n - j - 1) {
            sort_u64(v, j + 1);
            v += j + 1;
            n -= j + 1;
        } else {
            sort_u64(v + j + 1, n - j - 1);
            n = j + 1;
        }
    }
    for (int64_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        int64_t j = i;
        for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

int hs_inv_add(hs_inv *ix, const int64_t *slots, int64_t n, const int32_t *tids, const int64_t *offs) {
    int64_t maxs = -1, maxt = -1;
    for (int64_t i = 0; i < n; i++) {
        if (slots[i] < 0 || slots[i] > INT32_MAX || offs[i] > offs[i + 1]) return HS_EINVAL;
        if (offs[i + 1] - offs[i] > INT32_MAX) return HS_EINVAL; /* lengths and positions are int32 */
        if (slots[i] > maxs) maxs = slots[i];
        for (int64_t j = offs[i]; j < offs[i + 1]; j++) {
            if (tids[j] < 0) return HS_EINVAL;
            if (tids[j] > maxt) maxt = tids[j];
        }
    }
    if (grow_docs(ix, maxs + 1) || grow_terms(ix, maxt + 1)) return HS_ENOMEM;
    uint64_t *buf = NULL;
    int64_t bufcap = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = slots[i], m = offs[i + 1] - offs[i];
        if (remove_one(ix, s)) {
            free(buf);
            return HS_ENOMEM;
        }
        if (m == 0) continue;
        if (m > bufcap) {
            uint64_t *nb = realloc(buf, (size_t)m * sizeof(uint64_t));
            if (!nb) {
                free(buf);
                return HS_ENOMEM;
            }
            buf = nb;
            bufcap = m;
        }
        /* (term id, position) in one key: one sort orders the terms and each term's positions */
        const int32_t *t = tids + offs[i];
        for (int64_t j = 0; j < m; j++) buf[j] = (uint64_t)(uint32_t)t[j] << 32 | (uint64_t)j;
        sort_u64(buf, m);
        int64_t distinct = 1;
        for (int64_t j = 1; j < m; j++) distinct += (buf[j] >> 32) != (buf[j - 1] >> 32);
        int w = pos_width(m);
        /* one block per document: [tid | tf | positions] (one malloc, one free) */
        int32_t *block = malloc((size_t)distinct * 2 * sizeof(int32_t) + (size_t)m * (size_t)w);
        if (!block) {
            free(buf);
            return HS_ENOMEM;
        }
        fwd *f = &ix->docs[s];
        f->tid = block;
        f->tf = block + distinct;
        uint8_t *pos = (uint8_t *)(f->tf + distinct);
        int32_t c = 0;
        for (int64_t j = 0; j < m; j++) {
            if (j == 0 || (buf[j] >> 32) != (buf[j - 1] >> 32)) {
                f->tid[c] = (int32_t)(buf[j] >> 32);
                f->tf[c] = 0;
                c++;
            }
            f->tf[c - 1]++;
            pos_put(pos, w, j, (int32_t)(uint32_t)buf[j]);
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
        return HS_ENOMEM;
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
            return HS_ENOMEM;
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
                if (pos < p->len && p->doc[pos] < doc) pos = hs_gallop(p->doc, pos, p->len, doc);
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
    if (!seen) return HS_ENOMEM;
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
        return HS_ENOMEM;
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

/* a forward list: tid and tf, then its positions */
static inline int64_t fwd_nbytes(const fwd *f) { return (int64_t)f->n * 8 + (int64_t)f->dl * pos_width(f->dl); }

int64_t hs_inv_nbytes(const hs_inv *ix) {
    int64_t b = ix->nterms * (int64_t)sizeof(plist) + ix->ndocs_cap * (int64_t)sizeof(fwd);
    for (int64_t t = 0; t < ix->nterms; t++)
        if (!plist_borrowed(&ix->terms[t])) b += ix->terms[t].cap * 8;
    for (int64_t i = 0; i < ix->ndocs_cap; i++)
        if (!fwd_borrowed(ix, &ix->docs[i])) b += fwd_nbytes(&ix->docs[i]);
    return b;
}

int64_t hs_inv_borrowed_nbytes(const hs_inv *ix) {
    int64_t b = 0;
    for (int64_t t = 0; t < ix->nterms; t++)
        if (plist_borrowed(&ix->terms[t])) b += ix->terms[t].len * 8;
    for (int64_t i = 0; i < ix->ndocs_cap; i++)
        if (fwd_borrowed(ix, &ix->docs[i])) b += fwd_nbytes(&ix->docs[i]);
    return b;
}

/* ------------------------------------------------------- export / attach */

/* Trailing terms and slots never touched are left out of the export: they are
 * indistinguishable from the ones grow_terms / grow_docs would create. */
static int64_t used_terms(const hs_inv *ix) {
    int64_t n = ix->nterms;
    while (n > 0) {
        const plist *p = &ix->terms[n - 1];
        if (p->len || p->max_tf || p->min_dl != INT32_MAX) break;
        n--;
    }
    return n;
}

static int64_t used_slots(const hs_inv *ix) {
    int64_t n = ix->ndocs_cap;
    while (n > 0 && ix->docs[n - 1].dl == 0) n--;
    return n;
}

void hs_inv_export_sizes(const hs_inv *ix, hs_inv_flat *out) {
    out->nterms = used_terms(ix);
    out->nslots = used_slots(ix);
    int64_t np = 0;
    for (int64_t t = 0; t < out->nterms; t++) np += ix->terms[t].len;
    out->npost = np;
    int64_t npos = 0;
    for (int64_t i = 0; i < out->nslots; i++) npos += (int64_t)ix->docs[i].dl * pos_width(ix->docs[i].dl);
    out->npos = npos;
    out->N = ix->N;
    out->total = ix->total;
}

int hs_inv_export(const hs_inv *ix, const hs_inv_flat *out) {
    hs_inv_flat sz;
    hs_inv_export_sizes(ix, &sz);
    if (sz.nterms != out->nterms || sz.nslots != out->nslots || sz.npost != out->npost || sz.npos != out->npos)
        return HS_EINVAL;
    int64_t o = 0;
    for (int64_t t = 0; t < sz.nterms; t++) {
        const plist *p = &ix->terms[t];
        out->term_off[t] = o;
        memcpy(out->post_doc + o, p->doc, (size_t)p->len * sizeof(int32_t));
        memcpy(out->post_tf + o, p->tf, (size_t)p->len * sizeof(int32_t));
        out->term_max_tf[t] = p->max_tf;
        out->term_min_dl[t] = p->min_dl;
        o += p->len;
    }
    out->term_off[sz.nterms] = o;
    o = 0;
    for (int64_t s = 0; s < sz.nslots; s++) {
        const fwd *f = &ix->docs[s];
        /* the postings and the forward lists hold the same pairs: guards the buffers */
        if (o + f->n > sz.npost) return HS_EINVAL;
        out->slot_off[s] = o;
        memcpy(out->fwd_tid + o, f->tid, (size_t)f->n * sizeof(int32_t));
        memcpy(out->fwd_tf + o, f->tf, (size_t)f->n * sizeof(int32_t));
        out->doc_len[s] = f->dl;
        o += f->n;
    }
    out->slot_off[sz.nslots] = o;
    if (o != sz.npost) return HS_EINVAL;
    o = 0;
    for (int64_t s = 0; s < sz.nslots; s++) {
        const fwd *f = &ix->docs[s];
        int64_t len = (int64_t)f->dl * pos_width(f->dl);
        out->pos_off[s] = o;
        if (len) memcpy(out->fwd_pos + o, fwd_positions(ix, s, f), (size_t)len);
        o += len;
    }
    out->pos_off[sz.nslots] = o;
    return HS_OK;
}

#define BAD(msg)          \
    do {                  \
        *why = (msg);     \
        goto invalid;     \
    } while (0)

/* A 64-bit mix of one (term, slot, tf) pair. For a given tf it is a bijection of
 * (term, slot) (xor, xorshift and an odd multiply all are), and for a given
 * (term, slot) distinct tfs give distinct values, so changing one field of one pair
 * always changes the sum. Two multiplies:
 * splitmix64's full finaliser cost attach 10 ms more at 8M postings. */
static inline uint64_t pair_hash(int64_t t, int32_t s, int32_t tf) {
    uint64_t z = ((uint64_t)t << 32 | (uint32_t)s) ^ ((uint64_t)(uint32_t)tf * 0x9E3779B97F4A7C15ull);
    z ^= z >> 32;
    z *= 0xBF58476D1CE4E5B9ull;
    return z ^ (z >> 29);
}

/* Checks everything a later read or write relies on, so a bad file is HS_EINVAL
 * here rather than an out-of-bounds access later: offsets, ranges, order within
 * lists, tf >= 1, doc_len = sum of tf, N, total, the max_tf / min_dl bounds,
 * per term that the forward lists name it as often as its postings are long, and
 * each slot's positions (sizes, and a permutation of 0 .. dl-1 ascending per term).
 *
 * Matching the two views pair by pair costs a random access per posting (0.4 s
 * at 8M postings), so instead each view is read once, in order, summing a 64-bit
 * hash of its (term, slot, tf) pairs; both views are sets (lists strictly
 * ascending), so equal sums mean equal pairs except with probability ~2^-64 for
 * damaged (not crafted) input. Memory safety does not depend on that part: every
 * index used later was range-checked above; a crafted disagreement can only give
 * wrong results, as it would through any writer bug. */
static int validate(const hs_inv_flat *f, const char **why) {
    int64_t nt = f->nterms, ns = f->nslots, np = f->npost;
    int64_t *count = NULL;
    uint8_t *seen = NULL;
    if (nt < 0 || ns < 0 || np < 0 || f->npos < 0) BAD("negative array sizes");
    if (nt > INT32_MAX) BAD("more terms than int32 term ids can name");
    if (ns > (int64_t)INT32_MAX) BAD("more slots than int32 postings can name");
    if (f->term_off[0] != 0 || f->term_off[nt] != np) BAD("term_off must start at 0 and end at len(post_doc)");
    if (f->slot_off[0] != 0 || f->slot_off[ns] != np) BAD("slot_off must start at 0 and end at len(fwd_tid)");
    count = calloc((size_t)(nt ? nt : 1), sizeof(int64_t));
    if (!count) return HS_ENOMEM;
    /* the forward lists, slot by slot */
    uint64_t hf = 0;
    int64_t N = 0, total = 0;
    for (int64_t s = 0; s < ns; s++) {
        int64_t a = f->slot_off[s], b = f->slot_off[s + 1];
        if (a > b || b > np) BAD("slot_off is not ascending");
        int32_t dl = f->doc_len[s], prev = -1;
        int64_t sum = 0;
        for (int64_t j = a; j < b; j++) {
            int32_t t = f->fwd_tid[j], tf = f->fwd_tf[j];
            if (t <= prev) BAD("fwd_tid is not strictly ascending within a slot");
            if (t >= nt) BAD("fwd_tid names a term beyond term_off");
            if (tf < 1) BAD("fwd_tf must be >= 1");
            if (tf > f->term_max_tf[t]) BAD("term_max_tf is below a term frequency of the term");
            if (dl < f->term_min_dl[t]) BAD("term_min_dl is above the length of a document holding the term");
            sum += tf;
            count[t]++;
            hf += pair_hash(t, (int32_t)s, tf);
            prev = t;
        }
        if (dl < 0 || sum != dl) BAD("doc_len is not the sum of the slot's fwd_tf");
        N += dl > 0;
        total += dl;
    }
    if (N != f->N) BAD("n_docs is not the number of slots with terms");
    /* the positions: each slot's bytes hold dl positions, a permutation of 0 .. dl-1 ascending
     * within each term (phrase matching counts on both; memory safety needs only the sizes) */
    if (f->pos_off[0] != 0 || f->pos_off[ns] != f->npos) BAD("pos_off must start at 0 and end at len(fwd_pos)");
    int64_t maxdl = 0;
    for (int64_t s = 0; s < ns; s++) {
        int64_t a = f->pos_off[s], b = f->pos_off[s + 1], dl = f->doc_len[s];
        if (a > b || b > f->npos) BAD("pos_off is not ascending");
        if (b - a != dl * pos_width(dl)) BAD("a slot's positions are not doc_len entries of its width");
        if (dl > maxdl) maxdl = dl;
    }
    seen = calloc((size_t)(maxdl ? maxdl : 1), 1);
    if (!seen) {
        free(count);
        return HS_ENOMEM;
    }
    for (int64_t s = 0; s < ns; s++) {
        int32_t dl = f->doc_len[s];
        int w = pos_width(dl);
        const uint8_t *pos = f->fwd_pos + f->pos_off[s];
        int64_t k = 0;
        for (int64_t j = f->slot_off[s]; j < f->slot_off[s + 1]; j++) {
            int32_t prev = -1;
            for (int32_t r = 0; r < f->fwd_tf[j]; r++, k++) {
                int32_t p = pos_get(pos, w, k);
                if (p <= prev || p >= dl) BAD("positions are not ascending within a term and below doc_len");
                if (seen[p]) BAD("a position occurs twice in a slot");
                seen[p] = 1;
                prev = p;
            }
        }
        for (int64_t i = 0; i < k; i++) seen[pos_get(pos, w, i)] = 0;
    }
    if (total != f->total) BAD("total_len is not the sum of doc_len");
    /* the postings, term by term */
    uint64_t hp = 0;
    for (int64_t t = 0; t < nt; t++) {
        int64_t a = f->term_off[t], b = f->term_off[t + 1];
        if (a > b || b > np) BAD("term_off is not ascending");
        if (b - a != count[t]) BAD("a term's postings and the forward lists disagree on its document frequency");
        if (f->term_min_dl[t] < 1) BAD("term_min_dl must be >= 1");
        int32_t prev = -1;
        for (int64_t i = a; i < b; i++) {
            int32_t d = f->post_doc[i], tf = f->post_tf[i];
            if (d <= prev) BAD("post_doc is not strictly ascending within a term");
            if (d >= ns) BAD("post_doc names a slot beyond doc_len");
            hp += pair_hash(t, d, tf);
            prev = d;
        }
    }
    /* tf >= 1 and the bounds of post_tf follow from fwd_tf through the equal pairs */
    if (hp != hf) BAD("the postings and the forward lists disagree");
    free(count);
    free(seen);
    return HS_OK;
invalid:
    free(count);
    free(seen);
    return HS_EINVAL;
}

hs_inv *hs_inv_attach(const hs_inv_flat *f, int *err, const char **why) {
    const char *dummy = NULL;
    if (!why) why = &dummy;
    *why = NULL;
    int rc = validate(f, why);
    if (rc) {
        if (err) *err = rc;
        if (rc == HS_ENOMEM) *why = "out of memory";
        return NULL;
    }
    hs_inv *ix = calloc(1, sizeof(hs_inv));
    plist *terms = f->nterms ? malloc((size_t)f->nterms * sizeof(plist)) : NULL;
    fwd *docs = f->nslots ? malloc((size_t)f->nslots * sizeof(fwd)) : NULL;
    if (!ix || (f->nterms && !terms) || (f->nslots && !docs)) {
        free(ix);
        free(terms);
        free(docs);
        if (err) *err = HS_ENOMEM;
        *why = "out of memory";
        return NULL;
    }
    for (int64_t t = 0; t < f->nterms; t++) {
        int64_t a = f->term_off[t], len = f->term_off[t + 1] - a;
        plist *p = &terms[t];
        /* an empty list is owned (nothing to copy on its first insert) */
        p->doc = len ? f->post_doc + a : NULL;
        p->tf = len ? f->post_tf + a : NULL;
        p->len = len;
        p->cap = len ? -1 : 0;
        p->max_tf = f->term_max_tf[t];
        p->min_dl = f->term_min_dl[t];
    }
    for (int64_t s = 0; s < f->nslots; s++) {
        int64_t a = f->slot_off[s], n = f->slot_off[s + 1] - a;
        fwd *d = &docs[s];
        d->tid = n ? f->fwd_tid + a : NULL;
        d->tf = n ? f->fwd_tf + a : NULL;
        d->n = (int32_t)n;
        d->dl = f->doc_len[s];
    }
    ix->terms = terms;
    ix->nterms = f->nterms;
    ix->docs = docs;
    ix->ndocs_cap = f->nslots;
    ix->N = f->N;
    ix->total = f->total;
    if (f->npost) {
        ix->fwd_lo = (uintptr_t)f->fwd_tid;
        ix->fwd_hi = (uintptr_t)(f->fwd_tid + f->npost);
    }
    ix->pos_base = f->fwd_pos;
    ix->pos_off = f->pos_off;
    if (err) *err = HS_OK;
    return ix;
}
