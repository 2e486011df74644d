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
    int32_t t0;        /* TERM (and a one-term PHRASE): the term */
    double gmax;       /* the most this clause can score in any document of the field */
    /* PHRASE in a top-k search: a candidate whose bound (its phrase at the smallest tf of its
     * terms, plus `rest`, the most every other clause can add) cannot beat *theta, the field's
     * k-th score so far, is dropped before its positions are read */
    const float *theta;
    double rest, k1, b, avgdl;
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

static int it_init(const hs_inv *ix, const hs_inv_clause *c, qit *it, double k1, double b) {
    memset(it, 0, sizeof(*it));
    it->kind = c->kind;
    it->occur = c->occur;
    it->doc = -1;
    it->k1 = k1;
    it->b = b;
    it->avgdl = ix->N ? (double)ix->total / ix->N : 1.0;
    if (c->kind == HS_CL_ANY) {
        it->w = it->gmax = c->weight;
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
    it->t0 = c->terms[0];
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
    /* a document holding every term has a tf <= each term's max_tf and a length >= each min_dl */
    int32_t fmax = INT32_MAX, dlmin = 1;
    for (int64_t l = 0; l < it->nl; l++) {
        if (it->lists[l]->max_tf < fmax) fmax = it->lists[l]->max_tf;
        if (it->lists[l]->min_dl > dlmin) dlmin = it->lists[l]->min_dl;
    }
    if (it->lists[0]->len) it->gmax = term_score(it->w, fmax, dlmin, k1, b, it->avgdl);
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
        int64_t j = hs_lower_bound(f->tid, 0, f->n, it->terms[i]);
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
        if (i < p->len && p->doc[i] < d) i = hs_gallop(p->doc, i, p->len, d);
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

/* Whether document d, where the lists of the phrase `it` stand, cannot enter a top-k whose k-th
 * score is *theta: the phrase occurs at most as often as its rarest term there, and the other
 * clauses add at most `rest`. Computed as the score is (same function, same order) when nothing
 * else can add, so that equal bounds compare equal; with other clauses, a relative slack covers
 * a different summation order. A later document than every one kept loses a tie. */
static int below_theta(const hs_inv *ix, const qit *it, int32_t d) {
    int32_t fmin = INT32_MAX;
    for (int64_t l = 0; l < it->nl; l++) {
        int32_t tf = it->lists[l]->tf[it->at[l]];
        if (tf < fmin) fmin = tf;
    }
    double ub = term_score(it->w, fmin, ix->docs[d].dl, it->k1, it->b, it->avgdl);
    if (it->rest > 0) ub = (ub + it->rest) * (1.0 + 1e-9);
    return (float)ub <= *it->theta;
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
            if (allowed(bits, nbits, d) && !(it->theta && below_theta(ix, it, d))) {
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

static inline double freq_score(const qit *it, int32_t freq, int32_t dl) {
    return it->kind == HS_CL_ANY ? it->w : term_score(it->w, freq, dl, it->k1, it->b, it->avgdl);
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

/* One field's positive clauses (its MUST_NOT ones are out of the allowed bits already), in the
 * order their scores are summed: the required ones cheapest first (the first leads), then the
 * optional ones. */
typedef struct {
    const hs_inv *ix;
    qit *its;
    int64_t n;
    qit **must, **should;
    int64_t nm, ns;
} fieldq;

static void fq_free(fieldq *q) {
    for (int64_t i = 0; i < q->n; i++) it_free(&q->its[i]);
    free(q->its);
    free(q->must);
    free(q->should);
    memset(q, 0, sizeof(*q));
}

static int fq_init(fieldq *q, const hs_inv *ix, const hs_inv_clause *cl, int64_t ncl, double k1, double b) {
    memset(q, 0, sizeof(*q));
    q->ix = ix;
    q->its = calloc((size_t)(ncl + 1), sizeof(qit));
    q->must = malloc((size_t)(ncl + 1) * sizeof(qit *));
    q->should = malloc((size_t)(ncl + 1) * sizeof(qit *));
    if (!q->its || !q->must || !q->should) return HS_ENOMEM;
    for (int64_t i = 0; i < ncl; i++) {
        if (cl[i].occur == HS_OCCUR_MUST_NOT) continue;
        if (it_init(ix, &cl[i], &q->its[q->n++], k1, b)) return HS_ENOMEM;
    }
    for (int64_t i = 0; i < q->n; i++) {
        if (q->its[i].occur == HS_OCCUR_MUST) q->must[q->nm++] = &q->its[i];
        else q->should[q->ns++] = &q->its[i];
    }
    for (int64_t i = 1; i < q->nm; i++) {
        qit *x = q->must[i];
        int64_t j = i;
        for (; j > 0 && q->must[j - 1]->cost > x->cost; j--) q->must[j] = q->must[j - 1];
        q->must[j] = x;
    }
    double all = 0.0;
    for (int64_t i = 0; i < q->n; i++) all += q->its[i].gmax;
    for (int64_t i = 0; i < q->n; i++) q->its[i].rest = all - q->its[i].gmax;
    return HS_OK;
}

/* Where a field's matches go: every one into a hitlist, or the best k into a heap whose k-th
 * score phrases read (theta) to skip candidates that cannot beat it. */
typedef struct {
    hitlist *all;
    hs_heap *top;
    float theta;
} sink;

static int sink_push(sink *out, int32_t d, double score) {
    if (out->all) return hits_push(out->all, d, score);
    hs_heap_push(out->top, (float)score, d);
    out->theta = hs_heap_threshold(out->top);
    return HS_OK;
}

/* Every document the field matches (set in bits), ascending, with the field's score. */
static int eval_field(fieldq *q, const uint64_t *bits, int64_t nbits, sink *out) {
    const hs_inv *ix = q->ix;
    qit **must = q->must, **should = q->should;
    int64_t nm = q->nm, ns = q->ns;
    if (out->top)
        for (int64_t i = 0; i < q->n; i++)
            if (q->its[i].m) q->its[i].theta = &out->theta;
    int rc = HS_OK;
    if (nm) {
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
            for (int64_t i = 0; i < nm; i++) score += freq_score(must[i], must[i]->freq, dl);
            for (int64_t i = 0; i < ns; i++) {
                it_advance(ix, should[i], d, bits, nbits);
                if (should[i]->doc == d) score += freq_score(should[i], should[i]->freq, dl);
            }
            if ((rc = sink_push(out, d, score))) return rc;
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
                score += freq_score(should[i], should[i]->freq, dl);
                if (d == DONE - 1) should[i]->doc = DONE;
                else it_advance(ix, should[i], d + 1, bits, nbits);
            }
            if (allowed(bits, nbits, d) && (rc = sink_push(out, d, score))) return rc;
        }
    }
    return rc;
}

/* How often clause `it` matches document d (0: not at all), read from d's forward list. */
static int32_t freq_at(const hs_inv *ix, qit *it, int32_t d) {
    if (it->kind == HS_CL_ANY) return d < it->nset && ((it->set[d >> 6] >> (d & 63)) & 1);
    if (it->m) return phrase_freq(ix, d, it);
    if (it->lists[0] == &EMPTY) return 0;
    const fwd *f = &ix->docs[d];
    int64_t j = hs_lower_bound(f->tid, 0, f->n, it->t0);
    return j < f->n && f->tid[j] == it->t0 ? f->tf[j] : 0;
}

/* The field's score of one document, summed as eval_field sums it; -1 where it does not match. */
static double field_score_at(fieldq *q, int32_t d) {
    const hs_inv *ix = q->ix;
    if (d < 0 || d >= ix->ndocs_cap || ix->docs[d].dl == 0) return -1.0;
    int32_t dl = ix->docs[d].dl;
    double score = 0.0;
    int hit = 0;
    for (int64_t i = 0; i < q->nm; i++) {
        int32_t f = freq_at(ix, q->must[i], d);
        if (!f) return -1.0;
        score += freq_score(q->must[i], f, dl);
    }
    for (int64_t i = 0; i < q->ns; i++) {
        int32_t f = freq_at(ix, q->should[i], d);
        if (f) {
            hit = 1;
            score += freq_score(q->should[i], f, dl);
        }
    }
    return q->nm || hit ? score : -1.0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The top-k without counting the matches: each field's exact top-k, found with the phrases
 * skipping candidates that cannot enter it, then their union scored in every field (the
 * argument of lexical.py's best fields: a document of the overall top-k is in the top-k of the
 * field where it scores best). */
static int64_t query_topk(const hs_inv *const *ix, int64_t nf, const hs_inv_clause *const *cl, const int64_t *ncl,
                          double k1, double b, const uint64_t *bits, int64_t nbits, int64_t k, float *out_score,
                          int64_t *out_slot) {
    int64_t rc = HS_OK, nc = 0;
    fieldq *q = calloc((size_t)nf + 1, sizeof(fieldq));
    float *fs = malloc((size_t)(nf * k) * sizeof(float));
    int64_t *fslot = malloc((size_t)(nf * k) * sizeof(int64_t)), *cand = malloc((size_t)(nf * k) * sizeof(int64_t));
    int64_t *got = calloc((size_t)nf + 1, sizeof(int64_t));
    if (!q || !fs || !fslot || !cand || !got) {
        rc = HS_ENOMEM;
        goto done;
    }
    for (int64_t f = 0; f < nf && rc == HS_OK; f++) {
        if ((rc = fq_init(&q[f], ix[f], cl[f], ncl[f], k1, b))) break;
        hs_heap h;
        hs_heap_init(&h, fs + f * k, fslot + f * k, k);
        sink out = {NULL, &h, -INFINITY};
        if ((rc = eval_field(&q[f], bits, nbits, &out))) break;
        got[f] = hs_heap_finish(&h);
        for (int64_t i = 0; i < got[f]; i++) cand[nc++] = fslot[f * k + i];
    }
    if (rc) goto done;
    hs_heap h;
    hs_heap_init(&h, out_score, out_slot, k);
    if (nf == 1) {
        for (int64_t i = 0; i < got[0]; i++) hs_heap_push(&h, fs[i], fslot[i]);
        rc = hs_heap_finish(&h);
        goto done;
    }
    qsort(cand, (size_t)nc, sizeof(int64_t), cmp_i64);
    int64_t u = 0;
    for (int64_t i = 0; i < nc; i++)
        if (u == 0 || cand[i] != cand[u - 1]) cand[u++] = cand[i];
    for (int64_t i = 0; i < u; i++) {
        double best = -1.0;
        for (int64_t f = 0; f < nf; f++) {
            double v = field_score_at(&q[f], (int32_t)cand[i]);
            if (v > best) best = v;
        }
        hs_heap_push(&h, (float)best, cand[i]);
    }
    rc = hs_heap_finish(&h);
done:
    for (int64_t f = 0; q && f < nf; f++) fq_free(&q[f]);
    free(q);
    free(fs);
    free(fslot);
    free(cand);
    free(got);
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
            if (it_init(ix[f], &cl[f][i], &it, 0.0, 0.0)) { /* only its documents are read */
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
    if (total) *total = k > 0 ? -1 : 0;
    uint64_t *allow = NULL;
    int64_t nw = 0;
    hitlist acc = {0}, part = {0}, next = {0};
    int64_t rc = allowed_without_excluded(ix, nf, cl, ncl, bits, nbits, &allow, &nw);
    if (rc) return rc;
    const uint64_t *ab = allow ? allow : bits;
    int64_t anb = allow ? nw * 64 : nbits;
    if (k > 0) {
        rc = query_topk(ix, nf, cl, ncl, k1, b, ab, anb, k, out_score, out_slot);
        free(allow);
        return rc;
    }
    for (int64_t f = 0; f < nf && rc == HS_OK; f++) {
        fieldq q;
        rc = fq_init(&q, ix[f], cl[f], ncl[f], k1, b);
        part.n = 0;
        sink out = {&part, NULL, -INFINITY};
        if (rc == HS_OK) rc = eval_field(&q, ab, anb, &out);
        fq_free(&q);
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
        if (k < 0 && acc.n) {
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
