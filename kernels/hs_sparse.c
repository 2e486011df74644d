/* Mutable sparse-vector inverted index with exact dot-product top-k (see hs_sparse.h). */
#include "hs_sparse.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hs_gallop.h"
#include "hs_topk.h"

#define BLK HS_SP_BLOCK
#define WIN HS_SP_WINDOW
#define NO_KEY UINT32_MAX
/* bounds are sums of doubles in another order than the scores: never drop a document whose
 * score could reach the threshold through rounding */
#define MARGIN (1.0 + 1e-9)

typedef struct {
    int32_t *doc; /* slots, strictly ascending */
    float *w;     /* their weights */
    float *bmax;  /* bmax[b] = max of w over postings [b*BLK, (b+1)*BLK) */
    int64_t len, cap;
} splist;

/* a slot's forward list: one malloc'd block of n keys (ascending) followed by their n weights */
typedef struct {
    int32_t *key;
    int32_t n;
} spdoc;

static inline float *doc_vals(const spdoc *d) { return (float *)(d->key + d->n); }

struct hs_sp {
    splist *terms;
    int64_t nterms, terms_cap;
    /* open addressing, linear probing: hkey[h] (NO_KEY = free) is the key of term hterm[h] */
    uint32_t *hkey;
    int32_t *hterm;
    int64_t hcap;
    spdoc *docs;
    int64_t docs_cap;
    int64_t ndocs, nnz;
};

static inline int64_t nblocks(int64_t n) { return (n + BLK - 1) / BLK; }

/* ------------------------------------------------------------------ keys -> terms */

static inline uint64_t hpos(uint32_t key, int64_t cap) {
    return ((uint64_t)key * 0x9E3779B97F4A7C15ull >> 32) & (uint64_t)(cap - 1);
}

static int64_t term_of(const hs_sp *ix, int32_t key) {
    if (!ix->hcap) return -1;
    for (uint64_t h = hpos((uint32_t)key, ix->hcap);; h = (h + 1) & (uint64_t)(ix->hcap - 1)) {
        if (ix->hkey[h] == (uint32_t)key) return ix->hterm[h];
        if (ix->hkey[h] == NO_KEY) return -1;
    }
}

static int hash_grow(hs_sp *ix, int64_t cap) {
    uint32_t *k = malloc((size_t)cap * sizeof(uint32_t));
    int32_t *t = malloc((size_t)cap * sizeof(int32_t));
    if (!k || !t) {
        free(k);
        free(t);
        return HS_ENOMEM;
    }
    memset(k, 0xff, (size_t)cap * sizeof(uint32_t));
    for (int64_t i = 0; i < ix->hcap; i++) {
        if (ix->hkey[i] == NO_KEY) continue;
        uint64_t h = hpos(ix->hkey[i], cap);
        while (k[h] != NO_KEY) h = (h + 1) & (uint64_t)(cap - 1);
        k[h] = ix->hkey[i];
        t[h] = ix->hterm[i];
    }
    free(ix->hkey);
    free(ix->hterm);
    ix->hkey = k;
    ix->hterm = t;
    ix->hcap = cap;
    return HS_OK;
}

/* The term of key, made (with no posting) when it is new; HS_ENOMEM (< 0) on failure. A term is
 * never dropped: an empty one costs a few words and keeps term numbers stable. */
static int64_t term_get(hs_sp *ix, int32_t key) {
    int64_t t = term_of(ix, key);
    if (t >= 0) return t;
    if ((ix->nterms + 1) * 2 > ix->hcap && hash_grow(ix, ix->hcap ? ix->hcap * 2 : 1024)) return HS_ENOMEM;
    if (ix->nterms == ix->terms_cap) {
        int64_t cap = ix->terms_cap ? ix->terms_cap * 2 : 1024;
        splist *p = realloc(ix->terms, (size_t)cap * sizeof(splist));
        if (!p) return HS_ENOMEM;
        ix->terms = p;
        ix->terms_cap = cap;
    }
    t = ix->nterms++;
    memset(&ix->terms[t], 0, sizeof(splist));
    uint64_t h = hpos((uint32_t)key, ix->hcap);
    while (ix->hkey[h] != NO_KEY) h = (h + 1) & (uint64_t)(ix->hcap - 1);
    ix->hkey[h] = (uint32_t)key;
    ix->hterm[h] = (int32_t)t;
    return t;
}

/* ------------------------------------------------------------------ lifecycle */

hs_sp *hs_sp_new(void) { return calloc(1, sizeof(hs_sp)); }

void hs_sp_free(hs_sp *ix) {
    if (!ix) return;
    for (int64_t t = 0; t < ix->nterms; t++) {
        free(ix->terms[t].doc);
        free(ix->terms[t].w);
        free(ix->terms[t].bmax);
    }
    for (int64_t s = 0; s < ix->docs_cap; s++) free(ix->docs[s].key);
    free(ix->terms);
    free(ix->hkey);
    free(ix->hterm);
    free(ix->docs);
    free(ix);
}

static int grow_docs(hs_sp *ix, int64_t need) {
    if (need <= ix->docs_cap) return HS_OK;
    int64_t cap = ix->docs_cap ? ix->docs_cap : 1024;
    while (cap < need) cap *= 2;
    spdoc *p = realloc(ix->docs, (size_t)cap * sizeof(spdoc));
    if (!p) return HS_ENOMEM;
    memset(p + ix->docs_cap, 0, (size_t)(cap - ix->docs_cap) * sizeof(spdoc));
    ix->docs = p;
    ix->docs_cap = cap;
    return HS_OK;
}

/* Room for need postings; the contents are untouched (realloc keeps them), so a failure here
 * leaves the list as it was. */
static int reserve(splist *p, int64_t need) {
    if (need <= p->cap) return HS_OK;
    int64_t cap = p->cap ? p->cap : 4;
    while (cap < need) cap *= 2;
    int32_t *d = realloc(p->doc, (size_t)cap * sizeof(int32_t));
    if (!d) return HS_ENOMEM;
    p->doc = d;
    float *w = realloc(p->w, (size_t)cap * sizeof(float));
    if (!w) return HS_ENOMEM;
    p->w = w;
    float *m = realloc(p->bmax, (size_t)nblocks(cap) * sizeof(float));
    if (!m) return HS_ENOMEM;
    p->bmax = m;
    p->cap = cap;
    return HS_OK;
}

static void rebuild_bmax(splist *p, int64_t from) {
    for (int64_t b = from / BLK; b * BLK < p->len; b++) {
        int64_t end = (b + 1) * BLK < p->len ? (b + 1) * BLK : p->len;
        float m = 0.0f;
        for (int64_t i = b * BLK; i < end; i++)
            if (p->w[i] > m) m = p->w[i];
        p->bmax[b] = m;
    }
}


/* ------------------------------------------------------------------ writes */

/* One change to one posting list, packed so that one sort groups them by term and orders each
 * term's changes by slot, a removal before an insertion of the same slot:
 * key = term << (sbits + 1) | slot << 1 | (1 = insert w, 0 = remove). */
typedef struct {
    uint64_t key;
    float w;
} edit;

/* LSD radix sort on the low `bits` bits of key, 8 at a time, skipping digits every key shares. */
static void radix_sort(edit *a, edit *tmp, int64_t n, int bits) {
    edit *src = a, *dst = tmp;
    int64_t cnt[257];
    for (int shift = 0; shift < bits; shift += 8) {
        memset(cnt, 0, sizeof(cnt));
        for (int64_t i = 0; i < n; i++) cnt[((src[i].key >> shift) & 255) + 1]++;
        int same = 0;
        for (int d = 0; d < 256; d++) same |= cnt[d + 1] == n;
        if (same) continue;
        for (int d = 0; d < 256; d++) cnt[d + 1] += cnt[d];
        for (int64_t i = 0; i < n; i++) dst[cnt[(src[i].key >> shift) & 255]++] = src[i];
        edit *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof(edit));
}

static int bits_for(int64_t v) { /* bits holding 0 .. v (0 for v <= 0) */
    int b = 0;
    while (v > 0 && b < 63 && (v >> b) != 0) b++;
    return b;
}

/* The write path of add and remove, on a checked batch: every allocation first, then the
 * changes, which cannot fail. */
static int apply(hs_sp *ix, const int64_t *slots, int64_t n, const int64_t *indptr, const int32_t *keys,
                 const float *vals) {
    if (n == 0) return HS_OK;
    int rc = HS_ENOMEM;
    uint8_t *keep = NULL;
    int32_t *tid = NULL, **block = NULL, *sdoc = NULL;
    float *sw = NULL;
    edit *ed = NULL, *tmp = NULL;
    int64_t maxs = 0, base = indptr[0], nent = indptr[n] - indptr[0];
    for (int64_t i = 0; i < n; i++)
        if (slots[i] > maxs) maxs = slots[i];
    if (grow_docs(ix, maxs + 1)) goto done;
    /* a slot given twice keeps its last document: sort (slot, i), keep each slot's last i */
    keep = malloc((size_t)n);
    if (!keep) goto done;
    int ascending = 1;
    for (int64_t i = 1; i < n && ascending; i++) ascending = slots[i] > slots[i - 1];
    if (ascending) {
        memset(keep, 1, (size_t)n);
    } else {
        ed = malloc((size_t)n * sizeof(edit));
        tmp = malloc((size_t)n * sizeof(edit));
        if (!ed || !tmp) goto done;
        for (int64_t i = 0; i < n; i++) ed[i].key = (uint64_t)slots[i] << 32 | (uint64_t)i;
        radix_sort(ed, tmp, n, 64);
        for (int64_t r = 0; r < n; r++)
            keep[ed[r].key & 0xffffffffu] = r + 1 == n || (ed[r + 1].key >> 32) != (ed[r].key >> 32);
        free(ed);
        free(tmp);
        ed = tmp = NULL;
    }
    /* the terms of the new keys (made now: an empty term is harmless if a later step fails) */
    tid = malloc((size_t)(nent ? nent : 1) * sizeof(int32_t));
    block = calloc((size_t)n, sizeof(int32_t *));
    if (!tid || !block) goto done;
    int64_t E = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!keep[i]) continue;
        E += ix->docs[slots[i]].n + (indptr[i + 1] - indptr[i]);
        for (int64_t j = indptr[i]; j < indptr[i + 1]; j++) {
            int64_t t = term_get(ix, keys[j]);
            if (t < 0) goto done;
            tid[j - base] = (int32_t)t;
        }
        int64_t m = indptr[i + 1] - indptr[i];
        if (m && !(block[i] = malloc((size_t)m * (sizeof(int32_t) + sizeof(float))))) goto done;
    }
    /* every posting to remove (the old documents) or insert (the new ones), grouped by term */
    int sbits = bits_for(ix->docs_cap - 1), tbits = bits_for(ix->nterms - 1);
    ed = malloc((size_t)(E ? E : 1) * sizeof(edit));
    tmp = malloc((size_t)(E ? E : 1) * sizeof(edit));
    if (!ed || !tmp) goto done;
    int64_t e = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!keep[i]) continue;
        uint64_t s = (uint64_t)slots[i];
        const spdoc *old = &ix->docs[s];
        for (int32_t j = 0; j < old->n; j++) {
            ed[e].key = (uint64_t)term_of(ix, old->key[j]) << (sbits + 1) | s << 1;
            ed[e++].w = 0.0f;
        }
        for (int64_t j = indptr[i]; j < indptr[i + 1]; j++) {
            ed[e].key = (uint64_t)tid[j - base] << (sbits + 1) | s << 1 | 1u;
            ed[e++].w = vals[j];
        }
    }
    radix_sort(ed, tmp, E, tbits + sbits + 1);
    /* room in every list touched, and for the longest tail a merge rewrites */
    int64_t tail = 0;
    uint64_t smask = ((uint64_t)1 << sbits) - 1;
    for (int64_t a = 0, b; a < E; a = b) {
        uint64_t t = ed[a].key >> (sbits + 1);
        int64_t ins = 0;
        for (b = a; b < E && (ed[b].key >> (sbits + 1)) == t; b++) ins += ed[b].key & 1u;
        splist *p = &ix->terms[t];
        if (reserve(p, p->len + ins)) goto done;
        int64_t p0 = hs_lower_bound(p->doc, 0, p->len, (int64_t)((ed[a].key >> 1) & smask));
        if (p->len - p0 > tail) tail = p->len - p0;
    }
    sdoc = malloc((size_t)(tail ? tail : 1) * sizeof(int32_t));
    sw = malloc((size_t)(tail ? tail : 1) * sizeof(float));
    if (!sdoc || !sw) goto done;
    /* ---- no failure from here on */
    for (int64_t a = 0, b; a < E; a = b) {
        uint64_t t = ed[a].key >> (sbits + 1);
        for (b = a; b < E && (ed[b].key >> (sbits + 1)) == t; b++) {}
        splist *p = &ix->terms[t];
        int64_t p0 = hs_lower_bound(p->doc, 0, p->len, (int64_t)((ed[a].key >> 1) & smask));
        int64_t sl = p->len - p0, i = 0, o = p0;
        memcpy(sdoc, p->doc + p0, (size_t)sl * sizeof(int32_t));
        memcpy(sw, p->w + p0, (size_t)sl * sizeof(float));
        for (int64_t j = a; j < b; j++) {
            int32_t s = (int32_t)((ed[j].key >> 1) & smask);
            while (i < sl && sdoc[i] < s) {
                p->doc[o] = sdoc[i];
                p->w[o++] = sw[i++];
            }
            if (ed[j].key & 1u) {
                p->doc[o] = s;
                p->w[o++] = ed[j].w;
            } else if (i < sl && sdoc[i] == s) {
                i++;
            }
        }
        for (; i < sl; i++) {
            p->doc[o] = sdoc[i];
            p->w[o++] = sw[i];
        }
        p->len = o;
        rebuild_bmax(p, p0);
    }
    for (int64_t i = 0; i < n; i++) {
        if (!keep[i]) continue;
        spdoc *d = &ix->docs[slots[i]];
        ix->nnz -= d->n;
        ix->ndocs -= d->n > 0;
        free(d->key);
        int64_t m = indptr[i + 1] - indptr[i];
        d->key = block[i];
        d->n = (int32_t)m;
        block[i] = NULL;
        if (m) {
            memcpy(d->key, keys + indptr[i], (size_t)m * sizeof(int32_t));
            memcpy(doc_vals(d), vals + indptr[i], (size_t)m * sizeof(float));
        }
        ix->nnz += m;
        ix->ndocs += m > 0;
    }
    rc = HS_OK;
done:
    if (block)
        for (int64_t i = 0; i < n; i++) free(block[i]);
    free(block);
    free(keep);
    free(tid);
    free(ed);
    free(tmp);
    free(sdoc);
    free(sw);
    return rc;
}

int hs_sp_add(hs_sp *ix, const int64_t *slots, int64_t n, const int64_t *indptr, const int32_t *keys,
              const float *vals, const char **why) {
    const char *dummy;
    if (!why) why = &dummy;
    *why = NULL;
    if (n < 0 || indptr[0] < 0) {
        *why = "negative sizes";
        return HS_EINVAL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (slots[i] < 0 || slots[i] >= INT32_MAX) {
            *why = "slots must be in [0, 2**31 - 1)";
            return HS_EINVAL;
        }
        if (indptr[i + 1] < indptr[i]) {
            *why = "indptr must be ascending";
            return HS_EINVAL;
        }
        if (indptr[i + 1] - indptr[i] > INT32_MAX) {
            *why = "a document has more than 2**31 - 1 keys";
            return HS_EINVAL;
        }
        for (int64_t j = indptr[i]; j < indptr[i + 1]; j++) {
            if (keys[j] < 0) {
                *why = "keys must be in [0, 2**31)";
                return HS_EINVAL;
            }
            if (j > indptr[i] && keys[j] <= keys[j - 1]) {
                *why = "a document's keys must be strictly ascending";
                return HS_EINVAL;
            }
            if (!(vals[j] > 0.0f) || !isfinite(vals[j])) {
                *why = "weights must be finite and > 0";
                return HS_EINVAL;
            }
        }
    }
    return apply(ix, slots, n, indptr, keys, vals);
}

int hs_sp_remove(hs_sp *ix, const int64_t *slots, int64_t n) {
    int64_t *s = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    int64_t *ptr = calloc((size_t)n + 1, sizeof(int64_t));
    int rc = HS_ENOMEM;
    if (s && ptr) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (slots[i] >= 0 && slots[i] < ix->docs_cap && ix->docs[slots[i]].n) s[m++] = slots[i];
        rc = apply(ix, s, m, ptr, NULL, NULL); /* empty documents: every posting removed */
    }
    free(s);
    free(ptr);
    return rc;
}

/* ------------------------------------------------------------------ search */

static int check_query(const int32_t *qk, const float *qv, int64_t nq) {
    for (int64_t j = 0; j < nq; j++) {
        if (qk[j] < 0 || (j && qk[j] <= qk[j - 1])) return HS_EINVAL;
        if (!(qv[j] > 0.0f) || !isfinite(qv[j])) return HS_EINVAL;
    }
    return HS_OK;
}

typedef struct {
    const splist *p;
    double q;    /* the query's weight */
    int64_t pos; /* the first posting not yet passed */
    double ub;   /* the most it adds to a document of the current window */
} cursor;

typedef struct {
    cursor *cur;
    int32_t *ord;
    double *prefix;
    double *acc;       /* WIN partial scores, zero between uses */
    uint64_t *touched; /* WIN / 64 words, zero between uses */
} scratch;

static void scratch_free(scratch *sc) {
    free(sc->cur);
    free(sc->ord);
    free(sc->prefix);
    free(sc->acc);
    free(sc->touched);
    memset(sc, 0, sizeof(*sc));
}

static int scratch_init(scratch *sc, int64_t nq) {
    memset(sc, 0, sizeof(*sc));
    sc->cur = malloc((size_t)(nq + 1) * sizeof(cursor));
    sc->ord = malloc((size_t)(nq + 1) * sizeof(int32_t));
    sc->prefix = malloc((size_t)(nq + 2) * sizeof(double));
    sc->acc = calloc(WIN, sizeof(double));
    sc->touched = calloc(WIN / 64, sizeof(uint64_t));
    if (!sc->cur || !sc->ord || !sc->prefix || !sc->acc || !sc->touched) {
        scratch_free(sc);
        return HS_ENOMEM;
    }
    return HS_OK;
}

/* The first window holding a posting not yet passed (-1: none left). */
static int64_t next_window(const cursor *cur, int64_t m) {
    int64_t lo = INT64_MAX;
    for (int64_t c = 0; c < m; c++)
        if (cur[c].pos < cur[c].p->len && cur[c].p->doc[cur[c].pos] < lo) lo = cur[c].p->doc[cur[c].pos];
    return lo == INT64_MAX ? -1 : lo & ~(int64_t)(WIN - 1);
}

static inline void skip_to(cursor *c, int64_t s) {
    const splist *p = c->p;
    if (c->pos < p->len && p->doc[c->pos] < s) c->pos = hs_gallop(p->doc, c->pos, p->len, s);
}

/* the query weight times the largest block maximum among the blocks holding postings in
 * [.., hi) from the cursor on; 0 when it has none before hi */
static double window_ub(const cursor *c, int64_t hi) {
    const splist *p = c->p;
    if (c->pos >= p->len || p->doc[c->pos] >= hi) return 0.0;
    float m = 0.0f;
    for (int64_t b = c->pos / BLK; b * BLK < p->len && p->doc[b * BLK] < hi; b++)
        if (p->bmax[b] > m) m = p->bmax[b];
    return c->q * m;
}

static int64_t search_one(const hs_sp *ix, const int32_t *qk, const float *qv, int64_t nq, int64_t k,
                          const uint64_t *bits, int64_t nbits, int prune, float *out_score, int64_t *out_slot,
                          scratch *sc, int64_t *work) {
    for (int64_t i = 0; i < k; i++) {
        out_score[i] = -INFINITY;
        out_slot[i] = -1;
    }
    if (k <= 0 || (bits && nbits <= 0)) return 0;
    cursor *cur = sc->cur;
    int32_t *ord = sc->ord;
    double *prefix = sc->prefix, *acc = sc->acc;
    uint64_t *touched = sc->touched;
    int64_t m = 0, wk = 0;
    for (int64_t j = 0; j < nq; j++) {
        int64_t t = term_of(ix, qk[j]);
        if (t < 0 || ix->terms[t].len == 0) continue;
        cur[m].p = &ix->terms[t];
        cur[m].q = qv[j];
        cur[m].pos = 0;
        cur[m].ub = 0.0;
        m++;
    }
    int64_t limit = bits ? nbits : INT64_MAX, bwords = bits ? nbits >> 6 : 0;
    hs_heap h;
    hs_heap_init(&h, out_score, out_slot, k);
    for (int64_t lo = next_window(cur, m); lo >= 0 && lo < limit; lo = next_window(cur, m)) {
        int64_t hi = lo + WIN;
        double theta = h.size < k ? -INFINITY : (double)h.score[0];
        int skip = 0;
        if (bits) { /* a window the filter rules out entirely */
            uint64_t any = 0;
            for (int64_t w = lo >> 6; w < (hi >> 6) && w < bwords; w++) any |= bits[w];
            skip = any == 0;
        }
        int64_t na = 0;
        if (!skip) {
            for (int64_t c = 0; c < m; c++) {
                cur[c].ub = window_ub(&cur[c], hi);
                if (cur[c].ub <= 0.0) continue;
                /* ascending bounds (insertion sort: a query has tens of terms) */
                int64_t r = na++;
                for (; r > 0 && cur[ord[r - 1]].ub > cur[c].ub; r--) ord[r] = ord[r - 1];
                ord[r] = (int32_t)c;
            }
            prefix[0] = 0.0;
            for (int64_t r = 0; r < na; r++) prefix[r + 1] = prefix[r] + cur[ord[r]].ub;
            skip = prune && prefix[na] * MARGIN < theta;
        }
        if (skip) {
            for (int64_t c = 0; c < m; c++) skip_to(&cur[c], hi);
            continue;
        }
        /* ord[0 .. e) are non-essential: together they cannot lift a document to theta */
        int64_t e = 0;
        if (prune)
            while (e < na && prefix[e + 1] * MARGIN < theta) e++;
        for (int64_t r = e; r < na; r++) {
            cursor *c = &cur[ord[r]];
            const splist *p = c->p;
            const int32_t *doc = p->doc;
            const float *w = p->w;
            double q = c->q;
            int64_t pos = c->pos, len = p->len;
            for (; pos < len && doc[pos] < hi; pos++) {
                int64_t x = doc[pos] - lo;
                acc[x] += q * w[pos];
                touched[x >> 6] |= 1ull << (x & 63);
            }
            wk += pos - c->pos;
            c->pos = pos;
        }
        for (int64_t wi = 0; wi < WIN / 64; wi++) {
            uint64_t word = touched[wi];
            if (!word) continue;
            touched[wi] = 0;
            int64_t gw = (lo >> 6) + wi;
            uint64_t allow = !bits ? ~0ull : (gw < bwords ? bits[gw] : 0);
            while (word) {
                int bi = __builtin_ctzll(word);
                word &= word - 1;
                int64_t x = wi * 64 + bi;
                double s = acc[x];
                acc[x] = 0.0;
                if (!((allow >> bi) & 1)) continue;
                int64_t d = lo + x;
                int pruned = 0;
                for (int64_t r = e - 1; r >= 0; r--) {
                    if ((s + prefix[r + 1]) * MARGIN < theta) {
                        pruned = 1;
                        break;
                    }
                    cursor *c = &cur[ord[r]];
                    skip_to(c, d);
                    wk++;
                    if (c->pos < c->p->len && c->p->doc[c->pos] == d) s += c->q * c->p->w[c->pos];
                }
                if (pruned) continue;
                hs_heap_push(&h, (float)s, d);
                theta = h.size < k ? -INFINITY : (double)h.score[0];
            }
        }
        for (int64_t r = 0; r < e; r++) skip_to(&cur[ord[r]], hi);
    }
    if (work) *work += wk;
    return hs_heap_finish(&h);
}

int64_t hs_sp_search(const hs_sp *ix, const int32_t *qk, const float *qv, int64_t nq, int64_t k,
                     const uint64_t *bits, int64_t nbits, int prune, float *out_score, int64_t *out_slot,
                     int64_t *work) {
    if (nq < 0 || k < 0 || check_query(qk, qv, nq)) return HS_EINVAL;
    scratch sc;
    if (scratch_init(&sc, nq)) return HS_ENOMEM;
    int64_t rc = search_one(ix, qk, qv, nq, k, bits, nbits, prune, out_score, out_slot, &sc, work);
    scratch_free(&sc);
    return rc;
}

typedef struct {
    const hs_sp *ix;
    const int64_t *qptr;
    int64_t nqueries, first, step, maxq;
    const int32_t *qk;
    const float *qv;
    int64_t k;
    const uint64_t *bits;
    int64_t nbits;
    float *out_score;
    int64_t *out_slot, *nhits;
    int rc;
} batch_part;

static void *run_part(void *arg) {
    batch_part *b = arg;
    scratch sc;
    if (scratch_init(&sc, b->maxq)) {
        b->rc = HS_ENOMEM;
        return NULL;
    }
    for (int64_t i = b->first; i < b->nqueries; i += b->step) {
        int64_t a = b->qptr[i];
        b->nhits[i] = search_one(b->ix, b->qk + a, b->qv + a, b->qptr[i + 1] - a, b->k, b->bits, b->nbits, 1,
                                 b->out_score + i * b->k, b->out_slot + i * b->k, &sc, NULL);
    }
    scratch_free(&sc);
    b->rc = HS_OK;
    return NULL;
}

int hs_sp_search_batch(const hs_sp *ix, const int64_t *qptr, int64_t nqueries, const int32_t *qk, const float *qv,
                       int64_t k, const uint64_t *bits, int64_t nbits, int nthreads, float *out_score,
                       int64_t *out_slot, int64_t *nhits) {
    if (nqueries < 0 || k < 0 || (nqueries && qptr[0] < 0)) return HS_EINVAL;
    int64_t maxq = 0;
    for (int64_t i = 0; i < nqueries; i++) {
        int64_t a = qptr[i], n = qptr[i + 1] - a;
        if (n < 0 || check_query(qk + a, qv + a, n)) return HS_EINVAL;
        if (n > maxq) maxq = n;
    }
    if (nthreads < 1) nthreads = 1;
    if (nthreads > nqueries) nthreads = nqueries > 0 ? (int)nqueries : 1;
    batch_part *parts = calloc((size_t)nthreads, sizeof(batch_part));
    pthread_t *th = calloc((size_t)nthreads, sizeof(pthread_t));
    uint8_t *started = calloc((size_t)nthreads, 1);
    int rc = HS_ENOMEM;
    if (parts && th && started) {
        for (int t = 0; t < nthreads; t++) {
            parts[t] = (batch_part){ix, qptr, nqueries, t, nthreads, maxq, qk, qv, k, bits, nbits,
                                    out_score, out_slot, nhits, HS_ENOMEM};
            /* thread 0 is this one; a thread that cannot start leaves its queries to the next pass */
            if (t > 0) started[t] = pthread_create(&th[t], NULL, run_part, &parts[t]) == 0;
        }
        run_part(&parts[0]);
        rc = parts[0].rc;
        for (int t = 1; t < nthreads; t++) {
            if (started[t]) pthread_join(th[t], NULL);
            else run_part(&parts[t]);
            if (parts[t].rc != HS_OK) rc = parts[t].rc;
        }
    }
    free(parts);
    free(th);
    free(started);
    return rc;
}

int hs_sp_score(const hs_sp *ix, const int32_t *qk, const float *qv, int64_t nq, const int64_t *slots, int64_t n,
                float *out) {
    if (nq < 0 || check_query(qk, qv, nq)) return HS_EINVAL;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = slots[i];
        double acc = 0.0;
        if (s >= 0 && s < ix->docs_cap) {
            const spdoc *d = &ix->docs[s];
            const float *dv = doc_vals(d);
            int64_t a = 0, b = 0;
            while (a < nq && b < d->n) { /* both ascending: a merge */
                if (qk[a] < d->key[b]) a++;
                else if (qk[a] > d->key[b]) b++;
                else acc += (double)qv[a++] * dv[b++];
            }
        }
        out[i] = (float)acc;
    }
    return HS_OK;
}

int64_t hs_sp_matches(const hs_sp *ix, const int32_t *qk, int64_t nq, const uint64_t *bits, int64_t nbits,
                      int64_t *out, int64_t cap, int64_t *total) {
    int64_t nw = (ix->docs_cap + 63) / 64;
    uint64_t *seen = calloc((size_t)(nw ? nw : 1), sizeof(uint64_t));
    if (!seen) return HS_ENOMEM;
    for (int64_t j = 0; j < nq; j++) {
        int64_t t = term_of(ix, qk[j]);
        if (t < 0) continue;
        const splist *p = &ix->terms[t];
        for (int64_t i = 0; i < p->len; i++) seen[p->doc[i] >> 6] |= 1ull << (p->doc[i] & 63);
    }
    int64_t written = 0, count = 0;
    for (int64_t w = 0; w < nw; w++) {
        uint64_t word = seen[w];
        if (bits) word &= w < (nbits >> 6) ? bits[w] : 0;
        while (word) {
            int64_t s = w * 64 + __builtin_ctzll(word);
            word &= word - 1;
            if (written < cap) out[written++] = s;
            count++;
        }
    }
    free(seen);
    if (total) *total = count;
    return written;
}

/* ------------------------------------------------------------------ facts, export */

int64_t hs_sp_docs(const hs_sp *ix) { return ix->ndocs; }
int64_t hs_sp_nnz(const hs_sp *ix) { return ix->nnz; }

int64_t hs_sp_keys(const hs_sp *ix) {
    int64_t n = 0;
    for (int64_t t = 0; t < ix->nterms; t++) n += ix->terms[t].len > 0;
    return n;
}

int64_t hs_sp_nbytes(const hs_sp *ix) {
    int64_t b = ix->terms_cap * (int64_t)sizeof(splist) + ix->hcap * 8 + ix->docs_cap * (int64_t)sizeof(spdoc);
    for (int64_t t = 0; t < ix->nterms; t++) b += ix->terms[t].cap * 8 + nblocks(ix->terms[t].cap) * 4;
    return b + ix->nnz * 8;
}

int32_t hs_sp_doc(const hs_sp *ix, int64_t slot, int32_t *keys, float *vals) {
    if (slot < 0 || slot >= ix->docs_cap) return 0;
    const spdoc *d = &ix->docs[slot];
    if (keys && d->n) memcpy(keys, d->key, (size_t)d->n * sizeof(int32_t));
    if (vals && d->n) memcpy(vals, doc_vals(d), (size_t)d->n * sizeof(float));
    return d->n;
}

void hs_sp_export_sizes(const hs_sp *ix, int64_t *ndocs, int64_t *nnz) {
    *ndocs = ix->ndocs;
    *nnz = ix->nnz;
}

int hs_sp_export(const hs_sp *ix, int64_t ndocs, int64_t nnz, int64_t *slots, int64_t *indptr, int32_t *keys,
                 float *vals) {
    if (ndocs != ix->ndocs || nnz != ix->nnz) return HS_EINVAL;
    int64_t r = 0, o = 0;
    indptr[0] = 0;
    for (int64_t s = 0; s < ix->docs_cap; s++) {
        const spdoc *d = &ix->docs[s];
        if (!d->n) continue;
        if (r >= ndocs || o + d->n > nnz) return HS_EINVAL;
        slots[r] = s;
        memcpy(keys + o, d->key, (size_t)d->n * sizeof(int32_t));
        memcpy(vals + o, doc_vals(d), (size_t)d->n * sizeof(float));
        o += d->n;
        indptr[++r] = o;
    }
    return r == ndocs && o == nnz ? HS_OK : HS_EINVAL;
}
