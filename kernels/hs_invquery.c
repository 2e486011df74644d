/* Boolean queries over the inverted index (hs_inv_query): required, optional and excluded
 * clauses of terms, phrases (token positions) and constant-score term sets (prefixes), over
 * several fields, the best field winning.
 *
 * Each clause is an iterator over the documents it matches, ascending. A field with required
 * clauses walks their conjunction led by the cheapest one (the others gallop to its documents)
 * and adds the optional clauses found on each match; a field without walks the union of its
 * optional clauses. Every match is scored exactly, so no bound is needed: the documents a query
 * with required terms or phrases visits are few next to those of a plain OR, which keeps its
 * MaxScore search (hs_inv_search_best). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hs_invindex.h"
#include "hs_invindex_impl.h"
#include "hs_topk.h"

#define DONE INT32_MAX /* an iterator's doc once it has no document left */
#define PHRASE_BATCH 64 /* documents a phrase gathers before reading their positions */

static const plist EMPTY = {NULL, NULL, 0, 0, 0, INT32_MAX};

typedef struct {
    int32_t kind, occur;
    double w;          /* TERM / PHRASE: idf (a phrase: the sum over its terms) x weight; ANY: the score */
    int64_t cost;      /* documents it can visit: a conjunction is led by its cheapest clause */
    int32_t doc, freq; /* the current match (-1 before the first, DONE after the last), its tf */
    const plist **lists; /* TERM: its list; PHRASE: its distinct terms' lists, shortest first */
    int64_t *at;         /* a cursor per list */
    int64_t nl;
    const int32_t *terms; /* PHRASE: the terms in query order */
    int64_t m;
    int64_t *scr;      /* PHRASE: 4 x m scratch for phrase_freq */
    int32_t *cand;     /* PHRASE: documents holding every term, to verify (their lists prefetched) */
    int32_t ncand, icand, batch, next; /* buffered, the next to verify, batch size, where to go on */
    uint64_t *set;     /* ANY: the documents holding one of the terms */
    int64_t nset;      /* bits in set */
} qit;

static const plist *list_of(const hs_inv *ix, int32_t t) {
    return t >= 0 && t < ix->nterms ? &ix->terms[t] : &EMPTY;
}

static double idf_of(const hs_inv *ix, const plist *p) {
    double N = (double)ix->N, n = (double)p->len;
    return log(1.0 + (N - n + 0.5) / (n + 0.5));
}

static void it_free(qit *it) {
    free(it->lists);
    free(it->at);
    free(it->scr);
    free(it->cand);
    free(it->set);
    memset(it, 0, sizeof(*it));
}

static int it_init(const hs_inv *ix, const hs_inv_clause *c, qit *it) {
    memset(it, 0, sizeof(*it));
    it->kind = c->kind;
    it->occur = c->occur;
    it->doc = -1;
    if (c->kind == HS_CL_ANY) {
        it->w = c->weight;
        it->nset = ix->ndocs_cap;
        it->set = calloc((size_t)((it->nset + 63) / 64 + 1), sizeof(uint64_t));
        if (!it->set) return HS_ENOMEM;
        for (int64_t i = 0; i < c->nterms; i++) {
            const plist *p = list_of(ix, c->terms[i]);
            for (int64_t j = 0; j < p->len; j++) it->set[p->doc[j] >> 6] |= 1ull << (p->doc[j] & 63);
            it->cost += p->len;
        }
        return HS_OK;
    }
    int64_t m = c->kind == HS_CL_TERM ? (c->nterms > 0 ? 1 : 0) : c->nterms;
    it->lists = calloc((size_t)(m + 1), sizeof(plist *));
    it->at = calloc((size_t)(m + 1), sizeof(int64_t));
    if (!it->lists || !it->at) return HS_ENOMEM;
    if (m == 0) { /* no term: matches nothing */
        it->lists[0] = &EMPTY;
        it->nl = 1;
        return HS_OK;
    }
    double idf = 0.0;
    for (int64_t i = 0; i < m; i++) {
        const plist *p = list_of(ix, c->terms[i]);
        idf += idf_of(ix, p); /* every occurrence: Lucene's phrase weight sums its terms' idf */
        int64_t j = 0;
        while (j < it->nl && it->lists[j] != p) j++;
        if (j == it->nl) it->lists[it->nl++] = p;
    }
    /* shortest list first: it leads the phrase's conjunction */
    for (int64_t i = 1; i < it->nl; i++) {
        const plist *p = it->lists[i];
        int64_t j = i;
        for (; j > 0 && it->lists[j - 1]->len > p->len; j--) it->lists[j] = it->lists[j - 1];
        it->lists[j] = p;
    }
    it->cost = it->lists[0]->len;
    it->w = idf * c->weight;
    if (c->kind == HS_CL_PHRASE && m > 1) {
        it->terms = c->terms;
        it->m = m;
        it->scr = malloc((size_t)(4 * m) * sizeof(int64_t));
        it->cand = malloc(PHRASE_BATCH * sizeof(int32_t));
        if (!it->scr || !it->cand) return HS_ENOMEM;
        it->batch = 4;
    }
    return HS_OK;
}

/* How often the phrase occurs in slot s (which holds all of its terms): the number of start
 * positions p with term i at p + i for every i, overlapping occurrences counted (as Lucene's
 * ExactPhraseMatcher). */
static int32_t phrase_freq(const hs_inv *ix, int32_t s, qit *it) {
    const fwd *f = &ix->docs[s];
    int64_t m = it->m, *ent = it->scr, *off = ent + m, *tf = off + m, *cur = tf + m;
    for (int64_t i = 0; i < m; i++) {
        int64_t j = lower_bound(f->tid, 0, f->n, it->terms[i]);
        if (j >= f->n || f->tid[j] != it->terms[i]) return 0;
        ent[i] = j;
    }
    /* each term's positions start after the tf of the terms before it: one running sum over the
     * forward list, the phrase's entries visited in ascending order */
    for (int64_t i = 0; i < m; i++) cur[i] = i;
    for (int64_t i = 1; i < m; i++) {
        int64_t x = cur[i], j = i;
        for (; j > 0 && ent[cur[j - 1]] > ent[x]; j--) cur[j] = cur[j - 1];
        cur[j] = x;
    }
    int64_t q = 0, sum = 0;
    for (int64_t r = 0; r < m; r++) {
        int64_t i = cur[r];
        while (q < ent[i]) sum += f->tf[q++];
        off[i] = sum;
        tf[i] = f->tf[ent[i]];
    }
    int64_t lead = 0;
    for (int64_t i = 0; i < m; i++) {
        cur[i] = 0;
        if (tf[i] < tf[lead]) lead = i;
    }
    int w = pos_width(f->dl);
    const uint8_t *pos = fwd_positions(ix, s, f);
    int32_t freq = 0;
    /* the lead's positions ascending give ascending starts, so every cursor only moves forward */
    for (int64_t r = 0; r < tf[lead]; r++) {
        int64_t start = (int64_t)pos_get(pos, w, off[lead] + r) - lead;
        if (start < 0) continue;
        int ok = 1;
        for (int64_t i = 0; i < m && ok; i++) {
            if (i == lead) continue;
            int64_t want = start + i, c = cur[i];
            while (c < tf[i] && pos_get(pos, w, off[i] + c) < want) c++;
            cur[i] = c;
            if (c == tf[i]) return freq; /* term i has no position left for any later start */
            ok = pos_get(pos, w, off[i] + c) == want;
        }
        freq += ok;
    }
    return freq;
}

/* The first document >= target that holds every term of the iterator's lists (DONE if none). */
static int32_t conj_next(qit *it, int32_t target) {
    int32_t d = target;
    for (int64_t l = 0; l < it->nl;) {
        const plist *p = it->lists[l];
        int64_t i = it->at[l];
        if (i < p->len && p->doc[i] < d) i = gallop(p->doc, i, p->len, d);
        it->at[l] = i;
        if (i >= p->len) return DONE;
        if (p->doc[i] > d) { /* a later document: every list again from there */
            d = p->doc[i];
            l = l == 0 ? 1 : 0;
            continue;
        }
        l++;
    }
    return d;
}

/* Moves `it` to its first match >= target (no move when it is there already). A phrase skips the
 * documents outside bits, whose positions need not be read. */
static void it_advance(const hs_inv *ix, qit *it, int32_t target, const uint64_t *bits, int64_t nbits) {
    if (it->doc >= target) return;
    if (it->kind == HS_CL_ANY) {
        int64_t s = target, nw = (it->nset + 63) / 64;
        int64_t w = s >> 6;
        uint64_t word = w < nw ? it->set[w] & (~0ull << (s & 63)) : 0;
        while (!word && ++w < nw) word = it->set[w];
        it->doc = w < nw ? (int32_t)(w * 64 + __builtin_ctzll(word)) : DONE;
        it->freq = 1;
        return;
    }
    if (it->m == 0) { /* one term */
        int32_t d = conj_next(it, target);
        it->doc = d;
        if (d != DONE) it->freq = it->lists[0]->tf[it->at[0]];
        return;
    }
    /* A phrase: verifying a candidate costs a cache miss on its forward list, so candidates are
     * gathered in batches and their lists prefetched while the next ones are found. The batch
     * grows while the caller walks on document by document and shrinks when it jumps ahead (as
     * the optional phrase of a conjunction led by a rarer clause), whose gathered candidates
     * would be wasted. */
    for (;;) {
        int skipped = 0;
        while (it->icand < it->ncand) {
            int32_t d = it->cand[it->icand++];
            if (d < target) {
                skipped = 1;
                continue;
            }
            int32_t freq = phrase_freq(ix, d, it);
            if (freq > 0) {
                it->doc = d;
                it->freq = freq;
                return;
            }
        }
        if (skipped) it->batch = it->batch > 4 ? it->batch / 4 : 1;
        else if (it->batch < PHRASE_BATCH) it->batch *= 2;
        int32_t t = target > it->next ? target : it->next;
        it->ncand = it->icand = 0;
        while (it->ncand < it->batch && t != DONE) {
            int32_t d = conj_next(it, t);
            if (d == DONE) {
                t = DONE;
                break;
            }
            if (allowed(bits, nbits, d)) {
                const fwd *f = &ix->docs[d];
                __builtin_prefetch(f->tid);
                __builtin_prefetch(fwd_positions(ix, d, f));
                it->cand[it->ncand++] = d;
            }
            t = d == DONE - 1 ? DONE : d + 1;
        }
        it->next = t;
        if (it->ncand == 0) {
            it->doc = DONE;
            return;
        }
    }
}

static inline double it_score(const qit *it, int32_t dl, double k1, double b, double avgdl) {
    return it->kind == HS_CL_ANY ? it->w : term_score(it->w, it->freq, dl, k1, b, avgdl);
}

typedef struct {
    int32_t *slot;
    double *score;
    int64_t n, cap;
} hitlist;

static int hits_push(hitlist *h, int32_t s, double v) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? h->cap * 2 : 256;
        int32_t *a = realloc(h->slot, (size_t)cap * sizeof(int32_t));
        if (!a) return HS_ENOMEM;
        h->slot = a;
        double *c = realloc(h->score, (size_t)cap * sizeof(double));
        if (!c) return HS_ENOMEM;
        h->score = c;
        h->cap = cap;
    }
    h->slot[h->n] = s;
    h->score[h->n] = v;
    h->n++;
    return HS_OK;
}

static void hits_free(hitlist *h) {
    free(h->slot);
    free(h->score);
    memset(h, 0, sizeof(*h));
}

/* Every document field `ix` matches under the clauses `its` (MUST_NOT ones are skipped: the
 * caller removed their documents from bits), ascending, with the field's score. */
static int eval_field(const hs_inv *ix, qit *its, int64_t n, double k1, double b, const uint64_t *bits,
                      int64_t nbits, hitlist *out) {
    double avgdl = ix->N ? (double)ix->total / ix->N : 1.0;
    qit **must = malloc((size_t)(n + 1) * sizeof(qit *)), **should = malloc((size_t)(n + 1) * sizeof(qit *));
    int rc = HS_OK;
    if (!must || !should) {
        rc = HS_ENOMEM;
        goto done;
    }
    int64_t nm = 0, ns = 0;
    for (int64_t i = 0; i < n; i++) {
        if (its[i].occur == HS_OCCUR_MUST) must[nm++] = &its[i];
        else if (its[i].occur == HS_OCCUR_SHOULD) should[ns++] = &its[i];
    }
    if (nm) {
        for (int64_t i = 1; i < nm; i++) { /* cheapest first: it leads */
            qit *x = must[i];
            int64_t j = i;
            for (; j > 0 && must[j - 1]->cost > x->cost; j--) must[j] = must[j - 1];
            must[j] = x;
        }
        int32_t target = 0;
        for (;;) {
            it_advance(ix, must[0], target, bits, nbits);
            int32_t d = must[0]->doc;
            if (d == DONE) break;
            if (!allowed(bits, nbits, d)) {
                target = d + 1;
                continue;
            }
            int agree = 1;
            for (int64_t i = 1; i < nm && agree; i++) {
                it_advance(ix, must[i], d, bits, nbits);
                if (must[i]->doc != d) {
                    agree = 0;
                    target = must[i]->doc;
                }
            }
            if (!agree) {
                if (target == DONE) break;
                continue;
            }
            int32_t dl = ix->docs[d].dl;
            double score = 0.0;
            for (int64_t i = 0; i < nm; i++) score += it_score(must[i], dl, k1, b, avgdl);
            for (int64_t i = 0; i < ns; i++) {
                it_advance(ix, should[i], d, bits, nbits);
                if (should[i]->doc == d) score += it_score(should[i], dl, k1, b, avgdl);
            }
            if ((rc = hits_push(out, d, score))) goto done;
            if (d == DONE - 1) break;
            target = d + 1;
        }
    } else if (ns) {
        for (int64_t i = 0; i < ns; i++) it_advance(ix, should[i], 0, bits, nbits);
        for (;;) {
            int32_t d = DONE;
            for (int64_t i = 0; i < ns; i++)
                if (should[i]->doc < d) d = should[i]->doc;
            if (d == DONE) break;
            int32_t dl = ix->docs[d].dl;
            double score = 0.0;
            for (int64_t i = 0; i < ns; i++) {
                if (should[i]->doc != d) continue;
                score += it_score(should[i], dl, k1, b, avgdl);
                if (d == DONE - 1) should[i]->doc = DONE;
                else it_advance(ix, should[i], d + 1, bits, nbits);
            }
            if (allowed(bits, nbits, d) && (rc = hits_push(out, d, score))) goto done;
        }
    }
done:
    free(must);
    free(should);
    return rc;
}

/* a and b ascending -> their union ascending into out, the larger score where both hold a slot */
static int merge_max(const hitlist *a, const hitlist *b, hitlist *out) {
    int64_t i = 0, j = 0;
    while (i < a->n || j < b->n) {
        int32_t s;
        double v;
        if (j >= b->n || (i < a->n && a->slot[i] < b->slot[j])) {
            s = a->slot[i];
            v = a->score[i++];
        } else if (i >= a->n || b->slot[j] < a->slot[i]) {
            s = b->slot[j];
            v = b->score[j++];
        } else {
            s = a->slot[i];
            v = a->score[i] > b->score[j] ? a->score[i] : b->score[j];
            i++;
            j++;
        }
        if (hits_push(out, s, v)) return HS_ENOMEM;
    }
    return HS_OK;
}

/* bits (NULL: every slot) without the documents any MUST_NOT clause matches, as a new bitset of
 * nwords words; *out stays NULL when no field has a MUST_NOT clause */
static int allowed_without_excluded(const hs_inv *const *ix, int64_t nf, const hs_inv_clause *const *cl,
                                    const int64_t *ncl, const uint64_t *bits, int64_t nbits, uint64_t **out,
                                    int64_t *nwords) {
    *out = NULL;
    int any = 0;
    int64_t cap = 0;
    for (int64_t f = 0; f < nf; f++) {
        for (int64_t i = 0; i < ncl[f]; i++) any |= cl[f][i].occur == HS_OCCUR_MUST_NOT;
        if (ix[f]->ndocs_cap > cap) cap = ix[f]->ndocs_cap;
    }
    if (!any) return HS_OK;
    int64_t nw = (cap + 63) / 64 + 1;
    uint64_t *a = malloc((size_t)nw * sizeof(uint64_t));
    if (!a) return HS_ENOMEM;
    for (int64_t w = 0; w < nw; w++) {
        if (!bits) {
            a[w] = ~0ull;
            continue;
        }
        int64_t lo = w * 64;
        a[w] = lo >= nbits ? 0 : bits[w] & (nbits - lo >= 64 ? ~0ull : (1ull << (nbits - lo)) - 1);
    }
    for (int64_t f = 0; f < nf; f++) {
        for (int64_t i = 0; i < ncl[f]; i++) {
            if (cl[f][i].occur != HS_OCCUR_MUST_NOT) continue;
            qit it;
            if (it_init(ix[f], &cl[f][i], &it)) {
                it_free(&it);
                free(a);
                return HS_ENOMEM;
            }
            for (it_advance(ix[f], &it, 0, NULL, 0); it.doc != DONE;) {
                a[it.doc >> 6] &= ~(1ull << (it.doc & 63));
                if (it.doc == DONE - 1) break;
                it_advance(ix[f], &it, it.doc + 1, NULL, 0);
            }
            it_free(&it);
        }
    }
    *out = a;
    *nwords = nw;
    return HS_OK;
}

int64_t hs_inv_query(const hs_inv *const *ix, int64_t nf, const hs_inv_clause *const *cl, const int64_t *ncl,
                     float k1, float b, const uint64_t *bits, int64_t nbits, int64_t k, float *out_score,
                     int64_t *out_slot, int64_t **all_slot, float **all_score, int64_t *total) {
    for (int64_t i = 0; i < k; i++) {
        out_score[i] = -INFINITY;
        out_slot[i] = -1;
    }
    if (all_slot) *all_slot = NULL;
    if (all_score) *all_score = NULL;
    if (total) *total = 0;
    uint64_t *allow = NULL;
    int64_t nw = 0;
    hitlist acc = {0}, part = {0}, next = {0};
    int64_t rc = allowed_without_excluded(ix, nf, cl, ncl, bits, nbits, &allow, &nw);
    if (rc) return rc;
    const uint64_t *ab = allow ? allow : bits;
    int64_t anb = allow ? nw * 64 : nbits;
    for (int64_t f = 0; f < nf && rc == HS_OK; f++) {
        qit *its = calloc((size_t)(ncl[f] + 1), sizeof(qit));
        if (!its) {
            rc = HS_ENOMEM;
            break;
        }
        int64_t n = 0; /* the MUST_NOT clauses are left out: their documents are out of ab already */
        for (int64_t i = 0; i < ncl[f] && rc == HS_OK; i++)
            if (cl[f][i].occur != HS_OCCUR_MUST_NOT) rc = it_init(ix[f], &cl[f][i], &its[n++]);
        part.n = 0;
        if (rc == HS_OK) rc = eval_field(ix[f], its, n, k1, b, ab, anb, &part);
        for (int64_t i = 0; i < n; i++) it_free(&its[i]);
        free(its);
        if (rc == HS_OK && part.n) {
            next.n = 0;
            rc = merge_max(&acc, &part, &next);
            hitlist t = acc;
            acc = next;
            next = t;
        }
    }
    if (rc == HS_OK) {
        if (total) *total = acc.n;
        if (k >= 0) {
            hs_heap h;
            hs_heap_init(&h, out_score, out_slot, k);
            for (int64_t i = 0; i < acc.n; i++) hs_heap_push(&h, (float)acc.score[i], acc.slot[i]);
            rc = hs_heap_finish(&h);
        } else if (acc.n) {
            int64_t *s = malloc((size_t)acc.n * sizeof(int64_t));
            float *v = malloc((size_t)acc.n * sizeof(float));
            if (!s || !v) {
                free(s);
                free(v);
                rc = HS_ENOMEM;
            } else {
                for (int64_t i = 0; i < acc.n; i++) {
                    s[i] = acc.slot[i];
                    v[i] = (float)acc.score[i];
                }
                *all_slot = s;
                *all_score = v;
                rc = acc.n;
            }
        }
    }
    if (rc < 0 && total) *total = 0;
    hits_free(&acc);
    hits_free(&part);
    hits_free(&next);
    free(allow);
    return rc;
}
