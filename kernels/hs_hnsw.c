/* One mutable HNSW graph (Malkov & Yashunin) over caller-owned vectors. */
#define _GNU_SOURCE
#include "hs_hnsw.h"
#include "hs_topk.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "hs_distance.h"
#include "hs_rabitq.h"

#define NLOCKS 4096 /* striped per-node locks: no lock array to grow with the graph */
/* the RaBitQ centroids are k-means centres of the nodes, recomputed (and every code re-made) each
 * time the graph doubles, up to this many nodes: 64k rows place 64 centres as well as any */
#define RQ_RETRAIN_MAX 65536
#define RQ_CENTROIDS 64
#define ZERO_LOG 1024

/* The nodes a walk has visited: one bit per node (n / 8 bytes: 125 KB at a million nodes, which
 * stays in L2, where a 16-bit mark per node is 2 MB and every check of a neighbour missed it),
 * cleared at the next walk's start through the log of what was set (the whole set when the walk
 * set more than the log holds). */
#define VISIT_LOG 8192
typedef struct {
    uint64_t *bits;
    int64_t cap; /* nodes */
    int32_t *log;
    int64_t nlog; /* > VISIT_LOG: clear everything */
} vlist;

struct scratch;

struct hs_hnsw {
    int64_t d;
    int metric, M, M0, efc, quant;
    double mult;
    int64_t cap, n, count, pending;
    int32_t *links0;   /* cap x (M0 + 1): [count, ids...] */
    int8_t *level;     /* -1: no node */
    uint8_t *dead;     /* removed, still linked until repaired */
    int32_t *indeg;    /* level-0 links pointing at each node (from any node, removed ones included);
                          always owned, rebuilt from the links on attach/load */
    int32_t **upper;   /* per node: level x (M + 1) for levels 1..level */
    int32_t entry;
    int max_level;
    int64_t unchecked; /* nodes written since the last reachability BFS (reach_all) */
    /* nodes whose level-0 in-degree fell to 0 since the last reach_all: its orphan check looks at
       these and the nodes written, not at every node (a 1-row add on a large graph stays O(1));
       nzero past ZERO_LOG means it overflowed and the check scans every node */
    int32_t zero[ZERO_LOG];
    int64_t nzero;
    int borrowed;      /* level, links0, inv, codes, cscale, csq are the caller's (hs_hnsw_attach) */
    uint64_t rng;
    int8_t *codes;     /* int8 rows (quant) */
    float *cscale, *csq;
    /* RaBitQ (quant HS_HNSW_Q_RQ1 / _RQ4): per node one row of rs bytes, the code (cb bytes)
     * then its HS_RQ_NFACT float factors, so that scoring a node touches one place (borrowed
     * like codes); the centroid (owned), the nodes it was the mean of, and the context the walk
     * scores with (rebuilt when the centroid changes) */
    uint8_t *rqcodes;
    float *centroid;   /* RQ_CENTROIDS x d, the first rq_k in use */
    int rq_k;
    int64_t rq_trained, cb, rs;
    hs_rq_ctx *rq;
    double *rqwork;    /* encoding scratch (writes are exclusive) */
    double rq_eps;     /* eps0 of the bound that picks the candidates rescored */
    float *inv;        /* cosine: 1/|x| per node (0 for a zero vector); NULL otherwise */
    pthread_mutex_t locks[NLOCKS];
    pthread_mutex_t global;
    pthread_mutex_t pool_lock;
    struct scratch *pool;
};

/* ------------------------------------------------------------ small heaps */

typedef struct {
    float *d;
    int32_t *id;
    int64_t size, cap;
} pheap;

static int pheap_reserve(pheap *h, int64_t cap) {
    if (cap <= h->cap) return HS_OK;
    int64_t c = h->cap ? h->cap : 64;
    while (c < cap) c *= 2;
    float *d = realloc(h->d, (size_t)c * sizeof(float));
    if (!d) return HS_ENOMEM;
    h->d = d;
    int32_t *id = realloc(h->id, (size_t)c * sizeof(int32_t));
    if (!id) return HS_ENOMEM;
    h->id = id;
    h->cap = c;
    return HS_OK;
}

static void pheap_free(pheap *h) {
    free(h->d);
    free(h->id);
    h->d = NULL;
    h->id = NULL;
    h->cap = h->size = 0;
}

/* sign = +1: max-heap (root = farthest); sign = -1: min-heap (root = nearest) */
static inline int pheap_push(pheap *h, float dist, int32_t id, float sign) {
    if (h->size == h->cap && pheap_reserve(h, h->size + 1)) return HS_ENOMEM;
    int64_t i = h->size++;
    float key = dist * sign;
    while (i > 0) {
        int64_t p = (i - 1) >> 1;
        if (h->d[p] * sign >= key) break;
        h->d[i] = h->d[p];
        h->id[i] = h->id[p];
        i = p;
    }
    h->d[i] = dist;
    h->id[i] = id;
    return HS_OK;
}

static inline void pheap_pop(pheap *h, float sign) {
    int64_t n = --h->size;
    if (n == 0) return;
    float dist = h->d[n];
    int32_t id = h->id[n];
    float key = dist * sign;
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h->d[c + 1] * sign > h->d[c] * sign) c++;
        if (h->d[c] * sign <= key) break;
        h->d[i] = h->d[c];
        h->id[i] = h->id[c];
        i = c;
    }
    h->d[i] = dist;
    h->id[i] = id;
}

typedef struct {
    float d;
    int32_t id;
} pair;

static int pair_cmp(const void *a, const void *b) {
    const pair *x = a, *y = b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* per-thread scratch, pooled by the graph */
typedef struct scratch {
    pair *pairs;   /* final ordering, grows with ef */
    int64_t npairs;
    pheap cand, res, tmp;
    int32_t *nb;   /* neighbour copy, M0 + 1 */
    float *nd;     /* distances for selection */
    int32_t *fresh; /* unvisited neighbours gathered before scoring */
    int32_t *sel;   /* an insert's candidates, nearest first (ef_construct + 1) */
    float *seld;
    double *rqwork; /* RaBitQ encoding's scratch (2 x the padded dimension) */
    vlist v;
    /* RaBitQ walks: the prepared query, the gathered rows as int64 and their keys, and the
     * final candidates' keys and bounds (nrq entries) */
    hs_rq_query *rqq;
    int64_t *rrows;
    float *rkey, *rerr;
    int64_t nrq;
    struct scratch *next;
} scratch;

/* ---------------------------------------------------------------- helpers */

static inline int32_t *links_at(const hs_hnsw *g, int32_t node, int lc) {
    if (lc == 0) return g->links0 + (int64_t)node * (g->M0 + 1);
    return g->upper[node] + (int64_t)(lc - 1) * (g->M + 1);
}

static inline int max_links(const hs_hnsw *g, int lc) { return lc == 0 ? g->M0 : g->M; }

/* the level-0 in-degree count follows every change of a level-0 list: `delta` for each of the
   list's targets (atomic: lists of different nodes change under different locks) */
static inline void indeg_list(hs_hnsw *g, const int32_t *l, int lc, int delta) {
    if (lc != 0) return;
    for (int j = 0; j < l[0]; j++)
        if (__atomic_fetch_add(&g->indeg[l[1 + j]], delta, __ATOMIC_RELAXED) + delta == 0) {
            int64_t at = __atomic_fetch_add(&g->nzero, 1, __ATOMIC_RELAXED);
            if (at < ZERO_LOG) g->zero[at] = l[1 + j];
        }
}

static void indeg_rebuild(hs_hnsw *g) { /* one thread: plain counts */
    memset(g->indeg, 0, (size_t)(g->cap > 0 ? g->cap : 0) * sizeof(int32_t));
    for (int64_t i = 0; i < g->n; i++) {
        if (g->level[i] < 0) continue;
        const int32_t *l = links_at(g, (int32_t)i, 0);
        for (int j = 0; j < l[0]; j++) g->indeg[l[1 + j]]++;
    }
}

static inline int is_i8(const hs_hnsw *g) { return g->quant == HS_HNSW_Q_INT8; }
static inline int is_rq(const hs_hnsw *g) { return g->quant >= HS_HNSW_Q_RQ1; }
/* the factors of node 0 (node b's are rs / 4 floats further per node) */
static inline const float *rq_factors(const hs_hnsw *g) { return (const float *)(g->rqcodes + g->cb); }

static inline pthread_mutex_t *lock_of(hs_hnsw *g, int32_t node) {
    return &g->locks[(uint32_t)node % NLOCKS];
}

static inline float dist_vec(const hs_hnsw *g, const float *a, const float *b) {
    return g->metric == HS_METRIC_L2 ? hs_l2sq(a, b, g->d) : -hs_dot(a, b, g->d);
}

/* cosine keeps the caller's vectors as they are: a node's dot products are scaled by its
 * inverse norm, so the one float32 block serves the graph, exact search and the documents */
static inline float scale_of(const hs_hnsw *g, int32_t a) { return g->inv ? g->inv[a] : 1.0f; }

/* distance of vector q (scaled by qs under cosine) to node b */
static inline float dist_qx(const hs_hnsw *g, const float *q, float qs, const float *X, int32_t b) {
    float r = dist_vec(g, q, X + (int64_t)b * g->d);
    return g->inv ? r * qs * g->inv[b] : r;
}

static inline float dist_node(const hs_hnsw *g, const float *X, int32_t a, int32_t b) {
    return dist_qx(g, X + (int64_t)a * g->d, scale_of(g, a), X, b);
}

/* query traversal distance: int8 codes when quantized */
static inline float dist_query(const hs_hnsw *g, const float *X, const float *q, float qsq,
                               int32_t b) {
    if (!is_i8(g)) return dist_qx(g, q, 1.0f, X, b);
    float dot = g->cscale[b] * hs_dot_i8(q, g->codes + (int64_t)b * g->d, g->d);
    return g->metric == HS_METRIC_L2 ? qsq - 2.0f * dot + g->csq[b] : -dot;
}

static inline void prefetch_node(const hs_hnsw *g, const float *X, int32_t b) {
    if (is_i8(g)) {
        __builtin_prefetch(g->codes + (int64_t)b * g->d);
    } else if (is_rq(g)) { /* a row (code and factors) may straddle two lines */
        const char *p = (const char *)(g->rqcodes + (int64_t)b * g->rs);
        __builtin_prefetch(p);
        __builtin_prefetch(p + g->rs - 1);
    } else
        __builtin_prefetch(X + (int64_t)b * g->d);
}

/* every cache line of bytes [p, p + bytes), the last one too when p is not line-aligned */
static inline void prefetch_span(const void *p, int64_t bytes) {
    const char *c = (const char *)p;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o);
    if (bytes > 0) __builtin_prefetch(c + bytes - 1);
}

/* every line of a node's level-0 list (count and 2m links: 132 bytes at m 16, up to 3 lines) */
static inline void prefetch_links0(const hs_hnsw *g, int32_t b) {
    prefetch_span(g->links0 + (int64_t)b * (g->M0 + 1), (int64_t)(g->M0 + 1) * (int64_t)sizeof(int32_t));
}

/* every cache line of a node's vector (long vectors are many lines) */
static inline void prefetch_rows(const hs_hnsw *g, const float *X, int32_t b) {
    const char *p = is_i8(g) ? (const char *)(g->codes + (int64_t)b * g->d)
                    : is_rq(g) ? (const char *)(g->rqcodes + (int64_t)b * g->rs)
                               : (const char *)(X + (int64_t)b * g->d);
    int64_t bytes = is_i8(g) ? g->d : is_rq(g) ? g->rs : g->d * 4;
    for (int64_t o = 64; o < bytes; o += 64) __builtin_prefetch(p + o);
}

/* every cache line of a float row after its first */
static inline void prefetch_rest(const float *row, int64_t d) {
    if (d > 16) prefetch_span(row + 16, (d - 16) * (int64_t)sizeof(float));
}

static int random_level(hs_hnsw *g) {
    double u = ((hs_splitmix64(&g->rng) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    int l = (int)(-log(u) * g->mult);
    return l > HS_HNSW_MAX_LEVEL ? HS_HNSW_MAX_LEVEL : l;
}

static void scratch_free(scratch *s) {
    if (!s) return;
    pheap_free(&s->cand);
    pheap_free(&s->res);
    pheap_free(&s->tmp);
    free(s->pairs);
    free(s->nb);
    free(s->nd);
    free(s->fresh);
    free(s->sel), free(s->seld), free(s->rqwork);
    free(s->v.bits), free(s->v.log);
    hs_rq_query_free(s->rqq);
    free(s->rrows), free(s->rkey), free(s->rerr);
    free(s);
}

/* a thread's scratch from the graph's pool (no allocation per query once warm) */
static scratch *scratch_get(hs_hnsw *g) {
    pthread_mutex_lock(&g->pool_lock);
    scratch *s = g->pool;
    if (s) g->pool = s->next;
    pthread_mutex_unlock(&g->pool_lock);
    if (!s) {
        s = calloc(1, sizeof(scratch));
        if (!s) return NULL;
        s->nb = malloc((size_t)(g->M0 + 2) * sizeof(int32_t));
        s->nd = malloc((size_t)(g->M0 + 2) * sizeof(float));
        s->fresh = malloc((size_t)(g->M0 + 2) * sizeof(int32_t) * (g->M0 + 2));
        s->v.log = malloc(VISIT_LOG * sizeof(int32_t));
        s->sel = malloc((size_t)(g->efc + 2) * sizeof(int32_t));
        s->seld = malloc((size_t)(g->efc + 2) * sizeof(float));
        if (is_rq(g)) {
            s->rqwork = malloc((size_t)(2 * hs_rq_dp(g->d)) * sizeof(double));
            s->nrq = (int64_t)(g->M0 + 2) * (g->M0 + 2);
            s->rqq = hs_rq_query_new(g->d);
            s->rrows = malloc((size_t)s->nrq * sizeof(int64_t));
            s->rkey = malloc((size_t)s->nrq * sizeof(float));
            s->rerr = malloc((size_t)s->nrq * sizeof(float));
        }
        if (!s->nb || !s->nd || !s->fresh || !s->v.log || !s->sel || !s->seld ||
            (is_rq(g) && (!s->rqq || !s->rrows || !s->rkey || !s->rerr || !s->rqwork)) ||
            pheap_reserve(&s->cand, 256) ||
            pheap_reserve(&s->res, 256) || pheap_reserve(&s->tmp, 256)) {
            scratch_free(s);
            return NULL;
        }
    }
    vlist *v = &s->v;
    if (v->cap < g->cap) {
        uint64_t *b = realloc(v->bits, (size_t)((g->cap + 63) / 64) * sizeof(uint64_t));
        if (!b) {
            scratch_free(s);
            return NULL;
        }
        memset(b, 0, (size_t)((g->cap + 63) / 64) * sizeof(uint64_t));
        v->bits = b;
        v->cap = g->cap;
        v->nlog = 0;
    }
    return s;
}

static void scratch_put(hs_hnsw *g, scratch *s) {
    if (!s) return;
    pthread_mutex_lock(&g->pool_lock);
    s->next = g->pool;
    g->pool = s;
    pthread_mutex_unlock(&g->pool_lock);
}

/* a walk starts with nothing visited */
static inline void visit_reset(vlist *v) {
    if (v->nlog > VISIT_LOG)
        memset(v->bits, 0, (size_t)((v->cap + 63) / 64) * sizeof(uint64_t));
    else
        for (int64_t i = 0; i < v->nlog; i++) v->bits[v->log[i] >> 6] = 0;
    v->nlog = 0;
}

static inline int was_visited(const vlist *v, int32_t e) { return (int)((v->bits[e >> 6] >> (e & 63)) & 1); }

static inline void mark_visited(vlist *v, int32_t e) {
    v->bits[e >> 6] |= (uint64_t)1 << (e & 63);
    if (v->nlog < VISIT_LOG) v->log[v->nlog] = e;
    if (v->nlog <= VISIT_LOG) v->nlog++;
}

/* ------------------------------------------------------------- lifecycle */

hs_hnsw *hs_hnsw_new(int64_t d, int metric, int M, int ef_construct, uint64_t seed, int quant) {
    if (d <= 0 || M < 2 || M > HS_HNSW_MAX_M || ef_construct < 1) return NULL;
    if (metric != HS_METRIC_IP && metric != HS_METRIC_L2 && metric != HS_METRIC_COSINE) return NULL;
    if (quant < HS_HNSW_Q_NONE || quant > HS_HNSW_Q_RQ4) return NULL;
    hs_hnsw *g = calloc(1, sizeof(hs_hnsw));
    if (!g) return NULL;
    g->d = d;
    g->metric = metric;
    g->M = M;
    g->M0 = 2 * M;
    g->efc = ef_construct;
    g->quant = quant;
    g->mult = 1.0 / log((double)M);
    g->entry = -1;
    g->max_level = -1;
    g->rng = seed ? seed : 0x5EEDull;
    g->rq_eps = HS_HNSW_RESCORE_EPS;
    if (quant >= HS_HNSW_Q_RQ1) {
        g->cb = hs_rq_code_bytes(d, quant == HS_HNSW_Q_RQ1 ? 1 : 4);
        g->rs = g->cb + (int64_t)sizeof(float) * HS_RQ_CTX_NFACT;
        g->rqwork = malloc((size_t)(2 * hs_rq_dp(d)) * sizeof(double));
        g->centroid = calloc((size_t)(RQ_CENTROIDS * d), sizeof(float));
        g->rq_k = 1;
        if (!g->rqwork || !g->centroid) {
            free(g->rqwork), free(g->centroid), free(g);
            return NULL;
        }
    }
    for (int i = 0; i < NLOCKS; i++) pthread_mutex_init(&g->locks[i], NULL);
    pthread_mutex_init(&g->global, NULL);
    pthread_mutex_init(&g->pool_lock, NULL);
    return g;
}

void hs_hnsw_free(hs_hnsw *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n; i++) free(g->upper ? g->upper[i] : NULL);
    free(g->upper);
    free(g->dead);
    free(g->indeg);
    if (!g->borrowed) {
        free(g->links0);
        free(g->level);
        free(g->codes);
        free(g->cscale);
        free(g->csq);
        free(g->inv);
        free(g->rqcodes);
    }
    free(g->centroid);
    free(g->rqwork);
    hs_rq_ctx_free(g->rq);
    while (g->pool) {
        scratch *sc = g->pool;
        g->pool = sc->next;
        scratch_free(sc);
    }
    for (int i = 0; i < NLOCKS; i++) pthread_mutex_destroy(&g->locks[i]);
    pthread_mutex_destroy(&g->global);
    pthread_mutex_destroy(&g->pool_lock);
    free(g);
}

#define GROW(ptr, type, per)                                                       \
    do {                                                                           \
        type *p_ = realloc(ptr, (size_t)cap * (per) * sizeof(type));              \
        if (!p_) return HS_ENOMEM;                                                 \
        memset(p_ + (size_t)old * (per), 0, (size_t)(cap - old) * (per) * sizeof(type)); \
        ptr = p_;                                                                  \
    } while (0)

/* copies an array the graph does not own into malloc'd memory of the same size */
#define OWN(ptr, type, per)                                                        \
    do {                                                                           \
        if (ptr) {                                                                 \
            type *p_ = malloc((size_t)(g->cap > 0 ? g->cap : 1) * (per) * sizeof(type)); \
            if (!p_) goto nomem;                                                   \
            memcpy(p_, ptr, (size_t)g->cap * (per) * sizeof(type));               \
            ptr = p_;                                                              \
            fresh[nf++] = p_;                                                      \
        }                                                                          \
    } while (0)

/* before the first growth of an attached graph: realloc needs memory of our own */
static int own_arrays(hs_hnsw *g) {
    void *fresh[8];
    int nf = 0;
    int8_t *level = g->level, *codes = g->codes;
    int32_t *links0 = g->links0;
    float *inv = g->inv, *cscale = g->cscale, *csq = g->csq;
    uint8_t *rqcodes = g->rqcodes;
    OWN(g->level, int8_t, 1);
    OWN(g->links0, int32_t, g->M0 + 1);
    OWN(g->inv, float, 1);
    OWN(g->codes, int8_t, g->d);
    OWN(g->cscale, float, 1);
    OWN(g->csq, float, 1);
    OWN(g->rqcodes, uint8_t, g->rs);
    g->borrowed = 0;
    return HS_OK;
nomem:
    for (int i = 0; i < nf; i++) free(fresh[i]);
    g->level = level, g->codes = codes, g->links0 = links0;
    g->inv = inv, g->cscale = cscale, g->csq = csq;
    g->rqcodes = rqcodes;
    return HS_ENOMEM;
}

int hs_hnsw_reserve(hs_hnsw *g, int64_t cap) {
    if (cap <= g->cap) return HS_OK;
    if (cap > INT32_MAX) return HS_EINVAL;
    if (g->borrowed && own_arrays(g)) return HS_ENOMEM;
    int64_t old = g->cap;
    GROW(g->links0, int32_t, g->M0 + 1);
    GROW(g->upper, int32_t *, 1);
    GROW(g->dead, uint8_t, 1);
    GROW(g->indeg, int32_t, 1);
    {
        int8_t *p = realloc(g->level, (size_t)cap);
        if (!p) return HS_ENOMEM;
        memset(p + old, 0xFF, (size_t)(cap - old)); /* -1: no node */
        g->level = p;
    }
    if (g->metric == HS_METRIC_COSINE) GROW(g->inv, float, 1);
    if (is_i8(g)) {
        GROW(g->codes, int8_t, g->d);
        GROW(g->cscale, float, 1);
        GROW(g->csq, float, 1);
    }
    if (is_rq(g)) {
        GROW(g->rqcodes, uint8_t, g->rs);
    }
    g->cap = cap;
    return HS_OK;
}

/* the per-node data derived from its vector: the inverse norm (cosine), the int8 or RaBitQ code
 * row. work: the RaBitQ encoding's scratch (one per thread: rows are prepared in parallel) */
static void prepare_row_with(hs_hnsw *g, const float *X, int32_t s, double *work) {
    const float *x = X + (int64_t)s * g->d;
    float f = 1.0f;
    if (g->inv) {
        double sq = 0;
        for (int64_t j = 0; j < g->d; j++) sq += (double)x[j] * x[j];
        f = g->inv[s] = sq > 0 ? (float)(1.0 / sqrt(sq)) : 0.0f;
    }
    if (is_rq(g)) {
        uint8_t *row = g->rqcodes + (int64_t)s * g->rs;
        hs_rq_ctx_encode(g->rq, x, row, (float *)(row + g->cb), work);
        return;
    }
    if (!g->quant) return;
    float amax = 0.0f, sq = 0.0f;
    for (int64_t j = 0; j < g->d; j++) {
        float v = x[j] * f, a = fabsf(v);
        if (a > amax) amax = a;
        sq += v * v;
    }
    float scale = amax > 0 ? amax / 127.0f : 1.0f;
    int8_t *c = g->codes + (int64_t)s * g->d;
    for (int64_t j = 0; j < g->d; j++) c[j] = (int8_t)lrintf(x[j] * f / scale);
    g->cscale[s] = scale;
    g->csq[s] = sq;
}

static void prepare_row(hs_hnsw *g, const float *X, int32_t s) { prepare_row_with(g, X, s, g->rqwork); }

/* the context of the graph's centroids (made by rq_train or restored with the graph) */
static int rq_context(hs_hnsw *g, const float *centroids, int K) {
    hs_rq_params p = {g->d, g->quant == HS_HNSW_Q_RQ1 ? 1 : 4, g->metric, HS_HNSW_RQ_SEED, centroids};
    hs_rq_ctx *c = hs_rq_ctx_new_multi(&p, centroids, K);
    if (!c) return HS_ENOMEM;
    hs_rq_ctx_free(g->rq);
    g->rq = c;
    if (centroids != g->centroid) memcpy(g->centroid, centroids, (size_t)(K * g->d) * sizeof(float));
    g->rq_k = K;
    return HS_OK;
}

/* The centroids: k-means (kernels/hs_rabitq.c) of the rows of the live nodes and of `extra`
 * (n slots about to be added, or NULL), one per 1,024 rows up to RQ_CENTROIDS under l2 (else
 * one, their mean), and a context. */
static int rq_train(hs_hnsw *g, const float *X, const int64_t *extra, int64_t n) {
    int64_t *rows = malloc((size_t)(g->n + n + 1) * sizeof(int64_t)), used = 0;
    if (!rows) return HS_ENOMEM;
    for (int64_t i = 0; i < g->n + n; i++) {
        int64_t s = i < g->n ? i : extra[i - g->n];
        if (i < g->n && (g->level[s] < 0 || (g->pending && g->dead[s]))) continue;
        rows[used++] = s;
    }
    int64_t want = used / 1024;
    int K = want < 1 ? 1 : want > RQ_CENTROIDS ? RQ_CENTROIDS : (int)want;
    /* l2 only: measured on clustered data, nearer centroids sharpen the walk's l2 estimates
     * (recall@10 at ef 40, 20k x 128, 1 bit: 0.34 -> 0.45) but not its ip / cosine ones (0.81 ->
     * 0.72 with 16); there one centroid, the mean */
    if (g->metric != HS_METRIC_L2) K = 1;
    /* into a buffer of its own: out of memory leaves the graph's centroids, context and codes
     * as they were, consistent with each other */
    float *cent = malloc((size_t)(K * g->d) * sizeof(float));
    K = cent ? hs_rq_kmeans(g->d, g->metric, X, rows, used, K, 6, cent) : -1;
    free(rows);
    int rc = K < 1 || rq_context(g, cent, K) ? HS_ENOMEM : HS_OK;
    free(cent);
    if (rc == HS_OK) g->rq_trained = used > 0 ? used : 1;
    return rc;
}

int hs_hnsw_requantize(hs_hnsw *g, const float *X) {
    if (!g->quant && !g->inv) return HS_OK;
    if (is_rq(g) && rq_train(g, X, NULL, 0)) return HS_ENOMEM;
    for (int64_t s = 0; s < g->n; s++)
        if (g->level[s] >= 0) prepare_row(g, X, (int32_t)s);
    return HS_OK;
}

/* ----------------------------------------------------------- construction */

/* copies a node's level-lc list under its lock; returns the count */
static int copy_links(hs_hnsw *g, int32_t node, int lc, int32_t *out) {
    pthread_mutex_t *mu = lock_of(g, node);
    pthread_mutex_lock(mu);
    int32_t *l = links_at(g, node, lc);
    int c = l[0];
    memcpy(out, l + 1, (size_t)c * sizeof(int32_t));
    pthread_mutex_unlock(mu);
    return c;
}

/* ef-nearest of vector q at level lc from entry ep (construction: float, no filter) */
static int search_build(hs_hnsw *g, const float *X, const float *q, float qs, int32_t ep, int lc,
                        int ef, scratch *s) {
    vlist *v = &s->v;
    visit_reset(v);
    pheap *cand = &s->cand, *res = &s->res;
    cand->size = res->size = 0;
    const int64_t d = g->d;
    /* the kernel pointer once per walk, not a dispatch per distance */
    const hs_pair_fn fdist = g->metric == HS_METRIC_L2 ? hs_l2sq_impl() : hs_dot_impl();
    const float sign = g->metric == HS_METRIC_L2 ? 1.0f : -1.0f;
    const float *inv = g->inv;
    int32_t *fresh = s->fresh;
    /* no removal pending: no node is dead, and the byte per node is not read (a cache miss at
     * a million nodes) */
    const uint8_t *dead = g->pending ? g->dead : NULL;
#define BUILD_DIST(e) (inv ? sign * fdist(q, X + (int64_t)(e) * d, d) * qs * inv[e] \
                           : sign * fdist(q, X + (int64_t)(e) * d, d))
    float d0 = BUILD_DIST(ep);
    mark_visited(v, ep);
    if (pheap_push(cand, d0, ep, -1.0f)) return HS_ENOMEM;
    if (!(dead && dead[ep]) && pheap_push(res, d0, ep, 1.0f)) return HS_ENOMEM;
    float bound = res->size ? res->d[0] : INFINITY;
    while (cand->size) {
        float cd = cand->d[0];
        int32_t c = cand->id[0];
        if (cd > bound && res->size >= ef) break;
        pheap_pop(cand, -1.0f);
        int cnt = copy_links(g, c, lc, s->nb), nf = 0;
        /* the unvisited neighbours first, so that their rows' first lines load in parallel; the
         * rest of a row is fetched one row ahead of its distance */
        for (int j = 0; j < cnt; j++) {
            int32_t e = s->nb[j];
            if (was_visited(v, e)) continue;
            mark_visited(v, e);
            fresh[nf++] = e;
        }
        for (int j = 0; j < nf; j++) __builtin_prefetch(X + (int64_t)fresh[j] * d);
        if (nf) prefetch_rest(X + (int64_t)fresh[0] * d, d);
        for (int j = 0; j < nf; j++) {
            int32_t e = fresh[j];
            if (j + 1 < nf) prefetch_rest(X + (int64_t)fresh[j + 1] * d, d);
            float de = BUILD_DIST(e);
            if (res->size < ef || de < bound) {
                if (pheap_push(cand, de, e, -1.0f)) return HS_ENOMEM;
                if (!(dead && dead[e])) {
                    if (pheap_push(res, de, e, 1.0f)) return HS_ENOMEM;
                    if (res->size > ef) pheap_pop(res, 1.0f);
                    bound = res->d[0];
                }
            }
        }
    }
#undef BUILD_DIST
    return HS_OK;
}

/* HNSW heuristic: ids/dists sorted ascending by distance to the base; keeps a
 * candidate only if it is closer to the base than to every kept one. Returns kept count. */
static int select_heuristic(const hs_hnsw *g, const float *X, int32_t *ids, float *dists, int n,
                            int m) {
    int kept = 0;
    for (int i = 0; i < n && kept < m; i++) {
        int good = 1;
        for (int j = 0; j < kept; j++) {
            if (dist_node(g, X, ids[i], ids[j]) < dists[i]) {
                good = 0;
                break;
            }
        }
        if (good) {
            ids[kept] = ids[i];
            dists[kept] = dists[i];
            kept++;
        }
    }
    return kept;
}

static void sort_by_dist(int32_t *ids, float *dists, int n) {
    for (int i = 1; i < n; i++) {
        float dv = dists[i];
        int32_t iv = ids[i];
        int j = i - 1;
        while (j >= 0 && (dists[j] > dv || (dists[j] == dv && ids[j] > iv))) {
            dists[j + 1] = dists[j];
            ids[j + 1] = ids[j];
            j--;
        }
        dists[j + 1] = dv;
        ids[j + 1] = iv;
    }
}

/* adds `q` to node s's level-lc list, shrinking with the heuristic when full */
static void link_back(hs_hnsw *g, const float *X, int32_t s, int32_t q, int lc, scratch *sc) {
    int mmax = max_links(g, lc);
    pthread_mutex_t *mu = lock_of(g, s);
    pthread_mutex_lock(mu);
    int32_t *l = links_at(g, s, lc);
    int c = l[0];
    for (int j = 0; j < c; j++)
        if (l[1 + j] == q) {
            pthread_mutex_unlock(mu);
            return;
        }
    if (c < mmax) {
        l[1 + c] = q;
        l[0] = c + 1;
        if (lc == 0) __atomic_fetch_add(&g->indeg[q], 1, __ATOMIC_RELAXED);
    } else {
        for (int j = 0; j < c; j++) {
            sc->nb[j] = l[1 + j];
            sc->nd[j] = dist_node(g, X, s, l[1 + j]);
        }
        sc->nb[c] = q;
        sc->nd[c] = dist_node(g, X, s, q);
        sort_by_dist(sc->nb, sc->nd, c + 1);
        int k = select_heuristic(g, X, sc->nb, sc->nd, c + 1, mmax);
        indeg_list(g, l, lc, -1);
        memcpy(l + 1, sc->nb, (size_t)k * sizeof(int32_t));
        l[0] = k;
        indeg_list(g, l, lc, 1);
    }
    pthread_mutex_unlock(mu);
}

/* links node q (level already set, lists empty) into the graph */
static int insert_one(hs_hnsw *g, const float *X, int32_t q, scratch *s) {
    const float *qv = X + (int64_t)q * g->d;
    const float qs = scale_of(g, q);
    int lvl = g->level[q];
    pthread_mutex_lock(&g->global);
    int32_t ep = g->entry;
    int top = g->max_level;
    int hold = lvl > top; /* a new top node: keep the entry point stable meanwhile */
    if (ep < 0) {
        g->entry = q;
        g->max_level = lvl;
        pthread_mutex_unlock(&g->global);
        return HS_OK;
    }
    if (!hold) pthread_mutex_unlock(&g->global);

    float cd = dist_qx(g, qv, qs, X, ep);
    for (int lc = top; lc > lvl; lc--) {
        int changed = 1;
        while (changed) {
            changed = 0;
            int cnt = copy_links(g, ep, lc, s->nb);
            for (int j = 0; j < cnt; j++) {
                float de = dist_qx(g, qv, qs, X, s->nb[j]);
                if (de < cd) {
                    cd = de;
                    ep = s->nb[j];
                    changed = 1;
                }
            }
        }
    }
    int rc = HS_OK;
    int32_t *sel = s->sel;
    float *seld = s->seld;
    for (int lc = (lvl < top ? lvl : top); lc >= 0; lc--) {
        if ((rc = search_build(g, X, qv, qs, ep, lc, g->efc, s))) goto done;
        /* drain the max-heap into ascending order */
        int n = (int)s->res.size;
        for (int i = n - 1; i >= 0; i--) {
            sel[i] = s->res.id[0];
            seld[i] = s->res.d[0];
            pheap_pop(&s->res, 1.0f);
        }
        int start = 0;
        for (int i = n - 1; i >= 0; i--) /* re-linking may meet the node itself */
            if (sel[i] == q) {
                memmove(sel + i, sel + i + 1, (size_t)(n - i - 1) * sizeof(int32_t));
                memmove(seld + i, seld + i + 1, (size_t)(n - i - 1) * sizeof(float));
                n--;
            }
        int k = select_heuristic(g, X, sel + start, seld + start, n - start, g->M);
        if (k == 0 && n > start) k = 1;
        pthread_mutex_t *mu = lock_of(g, q);
        pthread_mutex_lock(mu);
        int32_t *l = links_at(g, q, lc);
        indeg_list(g, l, lc, -1);
        memcpy(l + 1, sel + start, (size_t)k * sizeof(int32_t));
        l[0] = k;
        indeg_list(g, l, lc, 1);
        pthread_mutex_unlock(mu);
        for (int j = 0; j < k; j++) link_back(g, X, sel[start + j], q, lc, s);
        if (n > start) ep = sel[start];
    }
    if (hold) {
        g->entry = q;
        g->max_level = lvl;
    }
done:
    if (hold) pthread_mutex_unlock(&g->global);
    return rc;
}

typedef struct {
    hs_hnsw *g;
    const float *X;
    const int32_t *nodes;
    int64_t n;
    int64_t next; /* shared work counter */
    pthread_mutex_t mu;
    int rc;
    int (*work)(hs_hnsw *, const float *, int32_t, scratch *);
} job;

static void *worker(void *arg) {
    job *jb = arg;
    scratch *s = scratch_get(jb->g);
    int rc = s ? HS_OK : HS_ENOMEM;
    while (!rc) {
        int64_t i = __atomic_fetch_add(&jb->next, 1, __ATOMIC_RELAXED);
        if (i >= jb->n) break;
        rc = jb->work(jb->g, jb->X, jb->nodes[i], s);
    }
    scratch_put(jb->g, s);
    if (rc) {
        pthread_mutex_lock(&jb->mu);
        jb->rc = rc;
        pthread_mutex_unlock(&jb->mu);
    }
    return NULL;
}

static int run_parallel(hs_hnsw *g, const float *X, const int32_t *nodes, int64_t n, int nthreads,
                        int (*work)(hs_hnsw *, const float *, int32_t, scratch *)) {
    job jb = {g, X, nodes, n, 0, PTHREAD_MUTEX_INITIALIZER, HS_OK, work};
    if (nthreads < 1) nthreads = 1;
    /* small batches: one thread (deterministic, and threads would not pay off) */
    if (n < 1024) nthreads = 1;
    if (nthreads > 64) nthreads = 64;
    pthread_t th[64];
    int started = 0;
    for (int t = 1; t < nthreads; t++) {
        if (pthread_create(&th[started], NULL, worker, &jb) == 0) started++;
    }
    worker(&jb);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&jb.mu);
    return jb.rc;
}

/* s->rqwork is never NULL under RaBitQ (scratch_get fails without it): never the shared buffer */
static int prepare_work(hs_hnsw *g, const float *X, int32_t q, scratch *s) {
    prepare_row_with(g, X, q, s->rqwork);
    return HS_OK;
}

/* prepare_row of every listed node, on nthreads threads (a RaBitQ code costs about as much as a
 * tenth of an insert: serial, it was a fifth of a two-thread build). Never fails: without memory
 * for the threads' scratch the rows are prepared here, one by one. */
static void prepare_nodes(hs_hnsw *g, const float *X, const int32_t *nodes, int64_t n, int nthreads) {
    if (!g->quant && !g->inv) return; /* nothing derived from the vectors */
    if (n > 0 && run_parallel(g, X, nodes, n, nthreads, prepare_work) != HS_OK)
        for (int64_t i = 0; i < n; i++) prepare_row(g, X, nodes[i]);
}

/* prepare_row of every node */
static void prepare_all(hs_hnsw *g, const float *X, int nthreads) {
    int32_t *live = malloc((size_t)(g->n + 1) * sizeof(int32_t));
    int64_t m = 0;
    for (int64_t s = 0; s < g->n; s++)
        if (g->level[s] >= 0) {
            if (live) live[m++] = (int32_t)s;
            else prepare_row(g, X, (int32_t)s);
        }
    if (live) prepare_nodes(g, X, live, m, nthreads);
    free(live);
}

/* ----------------------------------------------------------------- repair */

static int repair_one(hs_hnsw *g, const float *X, int32_t y, scratch *s) {
    for (int lc = 0; lc <= g->level[y]; lc++) {
        int32_t *l = links_at(g, y, lc);
        int c = l[0], hit = 0;
        for (int j = 0; j < c; j++) hit |= g->dead[l[1 + j]];
        if (!hit) continue;
        /* candidates: live neighbours + live neighbours of the removed ones; when that leaves
           fewer than a full list, chains of removed nodes are followed too (a bounded walk), so
           a cluster joined to the rest only through removed nodes stays joined */
        pheap *t = &s->tmp;
        t->size = 0;
        enum { WALK = 16 };
        int32_t walk[WALK];
        int nwalk = 0;
        for (int j = 0; j < c; j++) {
            int32_t e = l[1 + j];
            if (!g->dead[e]) {
                if (pheap_push(t, 0.0f, e, 1.0f)) return HS_ENOMEM;
            } else if (nwalk < WALK) {
                walk[nwalk++] = e;
            }
        }
        int direct = nwalk; /* the removed neighbours themselves: their live links first */
        for (int w = 0; w < nwalk; w++) {
            if (w == direct && t->size >= max_links(g, lc)) break; /* enough without the chains */
            int32_t *le = links_at(g, walk[w], lc);
            for (int i = 0; i < le[0]; i++) {
                int32_t f = le[1 + i];
                if (f == y || g->level[f] < lc) continue;
                if (!g->dead[f]) {
                    if (pheap_push(t, 0.0f, f, 1.0f)) return HS_ENOMEM;
                    continue;
                }
                int seen = 0;
                for (int v = 0; v < nwalk && !seen; v++) seen = walk[v] == f;
                if (!seen && nwalk < WALK) walk[nwalk++] = f;
            }
        }
        /* dedupe + distances (heap order does not matter: we sort below) */
        int64_t m = 0;
        for (int64_t i = 0; i < t->size; i++) {
            int dup = 0;
            for (int64_t j = 0; j < m; j++)
                if (t->id[j] == t->id[i]) {
                    dup = 1;
                    break;
                }
            if (!dup) {
                t->id[m] = t->id[i];
                t->d[m] = dist_node(g, X, y, t->id[i]);
                m++;
            }
        }
        sort_by_dist(t->id, t->d, (int)m);
        int mmax = max_links(g, lc);
        int k = (int)m;
        if (m > mmax) {
            /* the heuristic may keep far fewer than the list held: the nearest of the pruned
               candidates fill it back to its old size, so repairs do not thin the graph out */
            int32_t *sorted = malloc((size_t)m * sizeof(int32_t));
            if (!sorted) return HS_ENOMEM;
            memcpy(sorted, t->id, (size_t)m * sizeof(int32_t));
            k = select_heuristic(g, X, t->id, t->d, (int)m, mmax);
            int want = c < mmax ? c : mmax;
            for (int64_t i = 0; i < m && k < want; i++) {
                int kept = 0;
                for (int j = 0; j < k && !kept; j++) kept = t->id[j] == sorted[i];
                if (!kept) t->id[k++] = sorted[i];
            }
            free(sorted);
        }
        indeg_list(g, l, lc, -1);
        memcpy(l + 1, t->id, (size_t)k * sizeof(int32_t));
        l[0] = k;
        indeg_list(g, l, lc, 1);
    }
    return HS_OK;
}

static int relink_one(hs_hnsw *g, const float *X, int32_t q, scratch *s) {
    indeg_list(g, links_at(g, q, 0), 0, -1);
    for (int lc = 0; lc <= g->level[q]; lc++) links_at(g, q, lc)[0] = 0;
    return insert_one(g, X, q, s);
}

/* the highest live node other than `skip` and the nodes marked in `cleared` (may be NULL):
   an entry point for searches while those have no links; -1 when there is none */
static int32_t highest_node(const hs_hnsw *g, const uint8_t *cleared, int32_t skip) {
    int32_t best = -1;
    for (int64_t i = 0; i < g->n; i++)
        if (g->level[i] >= 0 && !g->dead[i] && i != skip && !(cleared && cleared[i]) &&
            (best < 0 || g->level[i] > g->level[best]))
            best = (int32_t)i;
    return best;
}

static void set_entry(hs_hnsw *g, int32_t e) {
    g->entry = e;
    g->max_level = e >= 0 ? g->level[e] : -1;
}

/* ----------------------------------------------------------- reachability */

/* Every live node must be reachable from the entry point over level-0 links, or no walk finds it.
   Group rewrites break that easily (every document of an FDE call gets one vector, under ip the
   small-norm group is never picked as a neighbour and keeps only links from before). Two repairs,
   single-threaded, after the parallel work of an add or repair:
   - a live node with level-0 in-degree 0 (the count is kept in indeg) is linked from the nearest
     node a walk toward it meets that can take it (link_orphan, adopt);
   - a BFS from the entry point over level-0 links finds islands (groups linking only among
     themselves): an unreached node is linked from the nearest node a walk toward it reaches, and
     everything it reaches is reached. The BFS reads n x M0 links, so an add runs it once the nodes
     written since the last one reach 1/16 of the graph (amortized), a repair always. */

/* puts v into u's level-0 list: appended when there is room, else in place of the target of the
   highest in-degree among those that may lose this link: with `parent` (a BFS tree of the reached
   nodes) any target u is not the tree parent of (everything reached stays reached), without it
   any target of in-degree >= 2 (it keeps an in-link); 0 when u cannot take v (or has no room and
   `replace` is 0). Callers offer v to every candidate with room before replacing any link: a
   replaced link is a loss for the walks (under ip a fresh graph has many nodes of in-degree 0,
   and replacing links first cost 0.07 of recall at ef 16 in test_graph_build) */
static int adopt(hs_hnsw *g, int32_t u, int32_t v, const int32_t *parent, int replace) {
    if (u == v || g->level[u] < 0 || g->dead[u]) return 0;
    int32_t *l = links_at(g, u, 0);
    int c = l[0], best = -1;
    for (int j = 0; j < c; j++)
        if (l[1 + j] == v) return 1;
    if (c < g->M0) {
        l[1 + c] = v;
        l[0] = c + 1;
        g->indeg[v]++;
        return 1;
    }
    if (!replace) return 0;
    for (int j = 0; j < c; j++) {
        int32_t w = l[1 + j];
        int may = parent ? parent[w] != u : g->indeg[w] >= 2;
        if (may && (best < 0 || g->indeg[w] > g->indeg[l[1 + best]])) best = j;
    }
    if (best < 0) return 0;
    g->indeg[l[1 + best]]--;
    l[1 + best] = v;
    g->indeg[v]++;
    return 1;
}

/* v linked from the nearest node a walk from the entry toward it meets (those are reached from
   the entry): a list with room first, else by replacing a link (adopt's rules); near holds efc
   ints. 1 linked, 0 not, < 0 error */
static int adopt_walk(hs_hnsw *g, const float *X, int32_t v, scratch *s, int32_t *near,
                      const int32_t *parent, int *replaced) {
    int rc = search_build(g, X, X + (int64_t)v * g->d, scale_of(g, v), g->entry, 0, g->efc, s);
    if (rc) return rc;
    int nn = (int)s->res.size;
    for (int j = nn - 1; j >= 0; j--) {
        near[j] = s->res.id[0];
        pheap_pop(&s->res, 1.0f);
    }
    for (int j = 0; j < 2 * nn; j++)
        if (adopt(g, near[j % nn], v, parent, j >= nn)) {
            if (replaced && j >= nn) *replaced = 1;
            return 1 + (j % nn);
        }
    return 0;
}

/* a node nothing links to at level 0 (never reached by a walk): linked from the nearest node of a
   walk toward it. Measured against linking it from its own nearest out-neighbour (or theirs):
   under ip that fills the lists of the large-norm nodes every walk passes through, and the
   FDE replay of test_graph_relink_ip failed 17 of 20 seeds instead of 3 (main: 3) */
static int link_orphan(hs_hnsw *g, const float *X, int32_t v, scratch *s, int32_t *near, int *replaced) {
    int rc = adopt_walk(g, X, v, s, near, NULL, replaced);
    return rc < 0 ? rc : rc > 0;
}

static inline int orphan(const hs_hnsw *g, int64_t i) {
    return i >= 0 && i < g->n && g->level[i] >= 0 && !g->dead[i] && g->indeg[i] == 0 && i != g->entry;
}

/* marks what start reaches over level-0 links, each newly reached node's tree parent recorded */
static void bfs_from(const hs_hnsw *g, int32_t start, uint8_t *seen, int32_t *parent, int32_t *queue) {
    int64_t head = 0, tail = 0;
    seen[start] = 1;
    queue[tail++] = start;
    while (head < tail) {
        int32_t u = queue[head++];
        const int32_t *l = links_at(g, u, 0);
        for (int j = 0; j < l[0]; j++) {
            int32_t e = l[1 + j];
            if (!seen[e]) {
                seen[e] = 1;
                parent[e] = u;
                queue[tail++] = e;
            }
        }
    }
}

/* The orphans checked: the nodes just written (`written`, m of them) and those whose in-degree
   fell to 0 since the last call, or every node when `written` is NULL or that log overflowed.
   Best effort: out of memory leaves some node unreachable until a later call, never the graph
   inconsistent, so it is not the write's failure (unchecked stays, the next add retries). */
static int reach_all(hs_hnsw *g, const float *X, int bfs, const int32_t *written, int64_t m) {
    const int64_t nzero = g->nzero;
    g->nzero = 0;
    if (g->entry < 0) return HS_OK;
    scratch *s = scratch_get(g);
    int32_t *near = malloc(((size_t)g->efc + 1) * sizeof(int32_t));
    uint8_t *seen = NULL;
    int32_t *queue = NULL, *parent = NULL;
    int rc = s && near ? HS_OK : HS_ENOMEM, left = 0;
    /* every node when a BFS is due anyway or the batch is a sixteenth of the graph or more (the
       scan is then paid for by the batch), else the nodes written and those that lost their last
       in-link: nodes left orphans earlier (a fresh ip graph has many) wait for the next full one */
    if (!written || nzero > ZERO_LOG || bfs || m * 16 >= g->count) {
        for (int64_t i = 0; i < g->n && rc >= 0; i++)
            if (orphan(g, i) && (rc = link_orphan(g, X, (int32_t)i, s, near, &left)) == 0) left = 1;
    } else {
        for (int64_t i = 0; i < m + nzero && rc >= 0; i++) {
            int32_t v = i < m ? written[i] : g->zero[i - m];
            if (orphan(g, v) && (rc = link_orphan(g, X, v, s, near, &left)) == 0) left = 1;
        }
    }
    /* an orphan linked in place of another link (an in-degree of 2 says nothing of where the
       other in-link comes from, so that may have cut something off), or not linked at all: the
       BFS pass checks now and links what is unreached, replacing only off-tree links */
    if (rc < 0 || !(bfs || left)) goto out;
    seen = malloc((size_t)g->n + 1);
    queue = malloc(((size_t)g->n + 1) * sizeof(int32_t));
    parent = malloc(((size_t)g->n + 1) * sizeof(int32_t));
    rc = seen && queue && parent ? HS_OK : HS_ENOMEM;
    /* only links off the BFS tree are replaced, so one round links every island; a second one
       checks (and catches an island no candidate could take: every list full of tree links) */
    for (int round = 0; rc >= 0 && round < 2; round++) {
        memset(seen, 0, (size_t)g->n);
        parent[g->entry] = -1;
        bfs_from(g, g->entry, seen, parent, queue);
        int64_t missing = 0;
        for (int64_t i = 0; i < g->n && rc >= 0; i++) {
            int32_t v = (int32_t)i;
            if (g->level[v] < 0 || g->dead[v] || seen[v]) continue;
            missing++;
            if ((rc = adopt_walk(g, X, v, s, near, parent, NULL)) > 0) {
                parent[v] = near[rc - 1];
                bfs_from(g, v, seen, parent, queue);
            }
        }
        if (!missing) break;
    }
    if (rc >= 0) g->unchecked = 0;
out:
    free(seen);
    free(queue);
    free(parent);
    free(near);
    scratch_put(g, s);
    return HS_OK;
}

int hs_hnsw_repair(hs_hnsw *g, const float *X, int nthreads) {
    if (g->pending == 0) return HS_OK;
    int32_t *live = malloc((size_t)(g->n + 1) * sizeof(int32_t));
    if (!live) return HS_ENOMEM;
    int64_t nl = 0;
    for (int64_t i = 0; i < g->n; i++)
        if (g->level[i] >= 0 && !g->dead[i]) live[nl++] = (int32_t)i;
    int rc = run_parallel(g, X, live, nl, nthreads, repair_one);
    if (rc) {
        free(live);
        return rc;
    }
    /* free the removed nodes */
    for (int64_t i = 0; i < g->n; i++) {
        if (!g->dead[i]) continue;
        free(g->upper[i]);
        g->upper[i] = NULL;
        indeg_list(g, links_at(g, (int32_t)i, 0), 0, -1);
        g->links0[i * (g->M0 + 1)] = 0;
        g->level[i] = -1;
        g->dead[i] = 0;
    }
    g->pending = 0;
    /* a new entry point if it went: the highest remaining node */
    if (g->entry >= 0 && g->level[g->entry] < 0) set_entry(g, highest_node(g, NULL, -1));
    /* an entry point left without level-0 links (all its neighbours went) would cut every
       search off: it is re-linked by a search from the next-highest node, and becomes
       the entry again (insert_one keeps the higher node on top) */
    int32_t old_entry = g->entry;
    if (nl > 1 && old_entry >= 0 && g->links0[(int64_t)old_entry * (g->M0 + 1)] == 0) {
        set_entry(g, highest_node(g, NULL, old_entry));
        scratch *s0 = scratch_get(g);
        rc = s0 ? relink_one(g, X, old_entry, s0) : HS_ENOMEM;
        scratch_put(g, s0);
        if (rc) {
            free(live);
            return rc;
        }
    }
    /* other nodes left without any level-0 link are re-linked by search */
    int64_t orphans = 0;
    for (int64_t j = 0; j < nl; j++)
        if (g->links0[(int64_t)live[j] * (g->M0 + 1)] == 0 && live[j] != g->entry)
            live[orphans++] = live[j];
    if (orphans) rc = run_parallel(g, X, live, orphans, 1, relink_one);
    free(live);
    return rc ? rc : reach_all(g, X, 1, NULL, 0);
}

int hs_hnsw_remove(hs_hnsw *g, const float *X, const int64_t *slots, int64_t n, int nthreads) {
    for (int64_t i = 0; i < n; i++) {
        int64_t s = slots[i];
        if (s < 0 || s >= g->n || g->level[s] < 0 || g->dead[s]) continue;
        g->dead[s] = 1;
        g->pending++;
        g->count--;
    }
    if (g->pending > 64 && g->pending * 50 > g->count) return hs_hnsw_repair(g, X, nthreads);
    return HS_OK;
}

static int insert_work(hs_hnsw *g, const float *X, int32_t q, scratch *s) {
    return insert_one(g, X, q, s);
}

int hs_hnsw_add(hs_hnsw *g, const float *X, const int64_t *slots, int64_t n, int nthreads) {
    for (int64_t i = 0; i < n; i++)
        if (slots[i] < 0 || slots[i] >= g->cap) return HS_EINVAL;
    if (is_rq(g) && n &&
        (!g->rq || (g->rq_trained < RQ_RETRAIN_MAX && g->count + n >= 2 * g->rq_trained))) {
        /* a new centroid: every node's code is re-made against it (the batch's below) */
        if (rq_train(g, X, slots, n)) return HS_ENOMEM;
        prepare_all(g, X, nthreads);
    }
    /* pending removals stay pending: an insert walks through removed nodes but never links to
       one (search_build keeps them out of its results), so no repair of the whole graph here */
    int rc = HS_OK;
    int32_t *nodes = malloc((size_t)(n + 1) * sizeof(int32_t));
    uint8_t *cleared = calloc((size_t)g->cap + 1, 1);
    if (!nodes || !cleared) {
        free(nodes);
        free(cleared);
        return HS_ENOMEM;
    }
    /* a slot that is a node gets a new vector: it keeps its level and the links that point
       at it (they stay valid edges), and its own links are rebuilt by a search, as for a new
       node - ef x M work per node, where unlinking it would repair the whole graph */
    int64_t m = 0, again = 0;
    int32_t **before = calloc((size_t)n + 1, sizeof(int32_t *)); /* old lists of the re-added */
    if (!before) {
        free(nodes);
        free(cleared);
        return HS_ENOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t s = (int32_t)slots[i];
        if (s >= g->n || g->level[s] < 0 || cleared[s]) continue;
        if (g->dead[s]) { /* a removed node's slot reused: revived with its new vector */
            g->dead[s] = 0;
            g->pending--;
            g->count++;
        }
        size_t words = (size_t)(g->M0 + 1) + (size_t)g->level[s] * (g->M + 1);
        before[again] = malloc(words * sizeof(int32_t));
        if (!before[again]) {
            rc = HS_ENOMEM;
            break;
        }
        int32_t *b = before[again];
        for (int lc = 0; lc <= g->level[s]; lc++) {
            int32_t *l = links_at(g, s, lc);
            memcpy(b, l, (size_t)(l[0] + 1) * sizeof(int32_t));
            b += lc == 0 ? g->M0 + 1 : g->M + 1;
            indeg_list(g, l, lc, -1);
            l[0] = 0;
        }
        cleared[s] = 1; /* its codes are re-made with the new nodes' below */
        nodes[m++] = s;
        again++;
    }
    if (rc) { /* out of memory before anything was unlinked for good: restore the links; the
                 codes follow the rows already written to X, as every later rescore reads them */
        prepare_nodes(g, X, nodes, m, nthreads);
        for (int64_t j = 0; j < again; j++) {
            int32_t s = nodes[j], *b = before[j];
            for (int lc = 0; lc <= g->level[s]; lc++, b += lc == 1 ? g->M0 + 1 : g->M + 1) {
                memcpy(links_at(g, s, lc), b, (size_t)(b[0] + 1) * sizeof(int32_t));
                indeg_list(g, b, lc, 1);
            }
            free(before[j]);
        }
        free(before);
        free(nodes);
        free(cleared);
        return rc;
    }
    if (again && cleared[g->entry]) {
        set_entry(g, highest_node(g, cleared, -1));
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t s = (int32_t)slots[i];
        if (g->level[s] >= 0) continue; /* re-added above, or a duplicate slot in the batch */
        int lvl = random_level(g);
        if (lvl > 0) {
            g->upper[s] = calloc((size_t)lvl * (g->M + 1), sizeof(int32_t));
            if (!g->upper[s]) {
                rc = HS_ENOMEM;
                break;
            }
        }
        g->links0[(int64_t)s * (g->M0 + 1)] = 0;
        g->level[s] = (int8_t)lvl;
        g->dead[s] = 0;
        if (s >= g->n) g->n = s + 1;
        g->count++;
        nodes[m++] = s;
    }
    /* every node given a level above gets its codes, even when a later one ran out of memory */
    prepare_nodes(g, X, nodes, m, nthreads);
    if (!rc && m) {
        /* the first node alone, so the others have an entry point */
        if (g->entry < 0) {
            scratch *s0 = scratch_get(g);
            rc = s0 ? insert_one(g, X, nodes[0], s0) : HS_ENOMEM;
            scratch_put(g, s0);
            if (!rc) rc = run_parallel(g, X, nodes + 1, m - 1, nthreads, insert_work);
        } else {
            rc = run_parallel(g, X, nodes, m, nthreads, insert_work);
        }
    }
    /* a re-added node keeps its old out-links where its lists have room: the nodes reached
       only through it stay reachable (the heuristic alone may now prune them away) */
    scratch *s0 = rc ? NULL : scratch_get(g);
    if (!rc && !s0) rc = HS_ENOMEM;
    for (int64_t j = 0; j < again; j++) {
        int32_t q = nodes[j], *b = before[j];
        for (int lc = 0; !rc && lc <= g->level[q]; lc++) {
            int32_t *l = links_at(g, q, lc);
            for (int i = 0; i < b[0] && l[0] < max_links(g, lc); i++) {
                int32_t v = b[1 + i];
                if (v != q && g->level[v] >= lc && !g->dead[v]) link_back(g, X, q, v, lc, s0);
            }
            b += lc == 0 ? g->M0 + 1 : g->M + 1;
        }
        free(before[j]);
    }
    if (s0) scratch_put(g, s0);
    free(before);
    free(cleared);
    if (!rc && m) {
        g->unchecked += m;
        rc = reach_all(g, X, g->unchecked * 16 >= g->count, nodes, m);
    }
    free(nodes);
    return rc;
}

/* ----------------------------------------------------------------- search */

/* kept pairs (distance-like keys, best first) as hits: scores higher-is-better, -euclidean for l2 */
static void write_hits(const hs_hnsw *g, const pair *pr, int64_t kept, float *out_score,
                       int64_t *out_id) {
    for (int64_t i = 0; i < kept; i++) {
        float dd = pr[i].d;
        out_score[i] = g->metric == HS_METRIC_L2 ? -sqrtf(dd > 0 ? dd : 0) : -dd;
        out_id[i] = pr[i].id;
    }
}

/* the walk key of one node under RaBitQ (the upper levels' greedy steps) */
static inline float rq_key1(const hs_hnsw *g, hs_rq_query *qq, int32_t b) {
    int64_t row = b;
    float key;
    hs_rq_query_keys(qq, g->rq, g->rqcodes, g->rs, rq_factors(g), g->rs / 4, &row, 1, 0.0, HS_RQ_BOUND_PROB, &key, NULL);
    return key;
}

/* The candidates a RaBitQ walk kept (s->res), rescored on the float32 rows in the order of
 * their bound's lower end, until the next lower end exceeds the k-th exact distance found:
 * the estimator's probabilistic bound (eps0 = g->rq_eps) decides how many rows are read. */
static int rq_rescore(const hs_hnsw *g, const float *X, const float *q, int64_t k, scratch *s,
                      float *out_score, int64_t *out_id) {
    pheap *res = &s->res, *best = &s->tmp;
    int64_t n = res->size;
    if (s->nrq < n) {
        int64_t *r = realloc(s->rrows, (size_t)n * sizeof(int64_t));
        if (r) s->rrows = r;
        float *a = realloc(s->rkey, (size_t)n * sizeof(float));
        if (a) s->rkey = a;
        float *b = realloc(s->rerr, (size_t)n * sizeof(float));
        if (b) s->rerr = b;
        if (!r || !a || !b) return HS_ENOMEM;
        s->nrq = n;
    }
    for (int64_t i = 0; i < n; i++) s->rrows[i] = res->id[i];
    hs_rq_query_keys(s->rqq, g->rq, g->rqcodes, g->rs, rq_factors(g), g->rs / 4, s->rrows, n, g->rq_eps, HS_RQ_BOUND_PROB, s->rkey,
                     s->rerr);
    pair *pr = s->pairs; /* ef + 1 entries, res holds at most ef */
    /* the keys are on the unit query's scale (the codes normalise it under cosine), dist_qx on q's */
    float qn = 1.0f;
    if (g->metric == HS_METRIC_COSINE) {
        float qq = hs_dot(q, q, g->d);
        qn = qq > 0 ? sqrtf(qq) : 0.0f;
    }
    for (int64_t i = 0; i < n; i++)
        pr[i].d = (s->rkey[i] - s->rerr[i]) * qn, pr[i].id = (int32_t)s->rrows[i];
    qsort(pr, (size_t)n, sizeof(pair), pair_cmp);
    best->size = 0;
    if (pheap_reserve(best, k + 1)) return HS_ENOMEM;
    /* the float rows are read in this order, out of cache (or from a mapped file): ask for the
     * next two rows' lines while one is scored */
    const int64_t rb = g->d * (int64_t)sizeof(float);
    for (int64_t i = 0; i < n && i < 2; i++) prefetch_span(X + (int64_t)pr[i].id * g->d, rb);
    for (int64_t i = 0; i < n; i++) {
        if (best->size >= k && pr[i].d > best->d[0]) break;
        if (i + 2 < n) prefetch_span(X + (int64_t)pr[i + 2].id * g->d, rb);
        float e = dist_qx(g, q, 1.0f, X, pr[i].id);
        if (best->size < k) {
            pheap_push(best, e, pr[i].id, 1.0f);
        } else if (e < best->d[0] || (e == best->d[0] && pr[i].id < best->id[0])) {
            pheap_pop(best, 1.0f);
            pheap_push(best, e, pr[i].id, 1.0f);
        }
    }
    int64_t kept = best->size;
    for (int64_t i = 0; i < kept; i++) pr[i].d = best->d[i], pr[i].id = best->id[i];
    qsort(pr, (size_t)kept, sizeof(pair), pair_cmp);
    write_hits(g, pr, kept, out_score, out_id);
    return HS_OK;
}

static inline int allowed(const hs_hnsw *g, const uint64_t *bits, int32_t e) {
    if (g->pending && g->dead[e]) return 0;
    return !bits || ((bits[e >> 6] >> (e & 63)) & 1);
}

static int search_one(const hs_hnsw *g, const float *X, const float *q, int64_t k, int64_t ef,
                      const uint64_t *bits, int mode, scratch *s, float *out_score,
                      int64_t *out_id, int64_t *visited) {
    int64_t evals = 0;
    for (int64_t i = 0; i < k; i++) {
        out_score[i] = -INFINITY;
        out_id[i] = -1;
    }
    if (visited) *visited = 0;
    if (g->entry < 0 || k == 0) return HS_OK;
    const int rq = is_rq(g);
    if (rq && (!g->rq || hs_rq_query_set(s->rqq, g->rq, q))) return HS_EINVAL;
    float qsq = g->metric == HS_METRIC_L2 ? hs_dot(q, q, g->d) : 0.0f;
    int32_t ep = g->entry;
    float cd = rq ? rq_key1(g, s->rqq, ep) : dist_query(g, X, q, qsq, ep);
    evals++;
    for (int lc = g->max_level; lc > 0; lc--) {
        int changed = 1;
        while (changed) {
            changed = 0;
            int32_t *l = links_at(g, ep, lc);
            for (int j = 0; j < l[0]; j++) {
                float de = rq ? rq_key1(g, s->rqq, l[1 + j]) : dist_query(g, X, q, qsq, l[1 + j]);
                evals++;
                if (de < cd) {
                    cd = de;
                    ep = l[1 + j];
                    changed = 1;
                }
            }
        }
    }
    if (ef < k) ef = k;
    if (s->npairs < ef + 1) {
        pair *p = realloc(s->pairs, (size_t)(ef + 1) * sizeof(pair));
        if (!p) return HS_ENOMEM;
        s->pairs = p;
        s->npairs = ef + 1;
    }
    vlist *vis = &s->v;
    visit_reset(vis);
    pheap *cand = &s->cand, *res = &s->res;
    cand->size = res->size = 0;
    mark_visited(vis, ep);
    if (pheap_push(cand, cd, ep, -1.0f)) return HS_ENOMEM;
    if (allowed(g, bits, ep) && pheap_push(res, cd, ep, 1.0f)) return HS_ENOMEM;
    float bound = res->size ? res->d[0] : INFINITY;
    const int stride = g->M0 + 1;
    const int64_t d = g->d;
    const int l2 = g->metric == HS_METRIC_L2;
    hs_pair_fn fdist = l2 ? hs_l2sq_impl() : hs_dot_impl();
    hs_i8_fn fi8 = hs_dot_i8_impl();
    const float *inv = g->inv;
    int32_t *fresh = s->fresh;
    while (cand->size) {
        float c_d = cand->d[0];
        int32_t c = cand->id[0];
        if (c_d > bound && res->size >= ef) break;
        pheap_pop(cand, -1.0f);
        /* RaBitQ rows are small, so a step waits on memory latency, not bandwidth: the walk
         * expands the two best candidates at once, so that one wait covers both lists' rows
         * (not with two-hop filtering, whose gathered lists are bounded for one candidate) */
        int32_t exp[2] = {c, -1};
        int nexp = 1;
        if (rq && mode != HS_HNSW_TWOHOP && cand->size && (cand->d[0] <= bound || res->size < ef)) {
            exp[nexp++] = cand->id[0];
            pheap_pop(cand, -1.0f);
        }
        /* the next candidate's links load while these neighbours are scored */
        if (cand->size) __builtin_prefetch(g->links0 + (int64_t)cand->id[0] * stride);
        int nf = 0;
        /* gather the unvisited neighbours first, so their vectors load in parallel */
        for (int x = 0; x < nexp; x++) {
            const int32_t *l = g->links0 + (int64_t)exp[x] * stride;
            const int cnt = l[0];
            for (int j = 0; j < cnt; j++) {
                int32_t e = l[1 + j];
                if (was_visited(vis, e)) continue;
                mark_visited(vis, e);
                if (mode == HS_HNSW_TWOHOP && !allowed(g, bits, e)) {
                    /* a non-matching neighbour is a bridge: take its matching neighbours */
                    const int32_t *le = g->links0 + (int64_t)e * stride;
                    for (int i = 0; i < le[0]; i++) {
                        int32_t f = le[1 + i];
                        if (was_visited(vis, f) || !allowed(g, bits, f)) continue;
                        mark_visited(vis, f);
                        fresh[nf++] = f;
                    }
                    continue;
                }
                fresh[nf++] = e;
            }
        }
        /* first line of every gathered vector now, the whole next vector one step ahead */
        for (int j = 0; j < nf; j++) prefetch_node(g, X, fresh[j]);
        /* one expansion ahead: the rows of the next candidate's unvisited neighbours (its links
         * were asked for when it was pushed), so that its step does not wait on memory; wasted
         * only when one of this step's neighbours overtakes it */
        if (rq && cand->size) {
            const int32_t *ln = g->links0 + (int64_t)cand->id[0] * stride;
            for (int j = 0; j < ln[0]; j++)
                if (!was_visited(vis, ln[1 + j])) prefetch_node(g, X, ln[1 + j]);
        }
        if (rq) { /* the whole gathered list in one kernel call */
            for (int j = 0; j < nf; j++) s->rrows[j] = fresh[j];
            hs_rq_query_keys(s->rqq, g->rq, g->rqcodes, g->rs, rq_factors(g), g->rs / 4, s->rrows, nf, 0.0, HS_RQ_BOUND_PROB,
                             s->rkey, NULL);
        } else if (nf) {
            prefetch_rows(g, X, fresh[0]);
        }
        for (int j = 0; j < nf; j++) {
            int32_t e = fresh[j];
            if (!rq && j + 1 < nf) prefetch_rows(g, X, fresh[j + 1]);
            float de;
            if (rq) {
                de = s->rkey[j];
            } else if (!g->quant) {
                float r = fdist(q, X + (int64_t)e * d, d);
                de = l2 ? r : (inv ? -r * inv[e] : -r);
            } else {
                float dot = g->cscale[e] * fi8(q, g->codes + (int64_t)e * d, d);
                de = l2 ? qsq - 2.0f * dot + g->csq[e] : -dot;
            }
            if (res->size < ef || de < bound) {
                if (pheap_push(cand, de, e, -1.0f)) return HS_ENOMEM;
                if (rq) prefetch_links0(g, e);
                if (mode == HS_HNSW_TWOHOP || allowed(g, bits, e)) {
                    if (pheap_push(res, de, e, 1.0f)) return HS_ENOMEM;
                    if (res->size > ef) pheap_pop(res, 1.0f);
                    bound = res->d[0];
                }
            }
        }
        evals += nf;
    }
    if (visited) *visited = evals;
    if (rq) return rq_rescore(g, X, q, k, s, out_score, out_id);
    /* final order; quantized candidates are re-scored on the float vectors */
    int64_t n = res->size;
    pair *pr = s->pairs;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = res->id[i];
        pr[i].id = id;
        pr[i].d = g->quant ? dist_qx(g, q, 1.0f, X, id) : res->d[i];
    }
    qsort(pr, (size_t)n, sizeof(pair), pair_cmp);
    int64_t kept = n < k ? n : k;
    write_hits(g, pr, kept, out_score, out_id);
    return HS_OK;
}

int hs_hnsw_search(const hs_hnsw *g, const float *X, const float *Q, int64_t nq, int64_t k,
                   int64_t ef, const uint64_t *bits, int mode, float *out_score,
                   int64_t *out_id, int64_t *visited) {
    hs_hnsw *mg = (hs_hnsw *)g; /* the visited pool and scratch are the only shared state touched */
    scratch *s = scratch_get(mg);
    int rc = s ? HS_OK : HS_ENOMEM;
    for (int64_t i = 0; i < nq && !rc; i++)
        rc = search_one(g, X, Q + i * g->d, k, ef, bits, mode, s, out_score + i * k,
                        out_id + i * k, visited ? visited + i : NULL);
    scratch_put(mg, s);
    return rc;
}

/* ------------------------------------------------------------ exact scan on the codes */

HS_DEFINE_KTH_PUSH(kth_push, float)

/* Why this is exact: a code row c of vector v (unit length under cosine) with scale s has
 * |v_j - s c_j| <= s / 2 per dimension, so |q.v - s q.c| <= s |q|_1 / 2 (twice that for l2,
 * whose distance holds -2 q.v). Every row's true distance lies within its bound of the
 * approximate one; the k-th smallest upper end U bounds the true k-th distance, so every
 * row of the true top-k has approximate - bound <= U: those rows alone are re-scored on the
 * float vectors. gamma covers float32 rounding: of the code sum (127 |q|_1 s per row) and of
 * the float distance (|q| |x|, or |q|^2 + |x|^2 for l2). */
/* The end of an exact scan on codes: of the m rows ids[i] whose estimate est[i] lies within
 * err[i] of the float key, those whose lower end can reach U (the k-th smallest upper end) are
 * rescored on float32; the top k of them, best first, padded. */
static int rescore_in_doubt(const hs_hnsw *g, const float *X, const float *q, int64_t k,
                            const float *est, const float *err, const int32_t *ids, int64_t m,
                            float U, pair **pairs, int64_t *npairs, float *out_score,
                            int64_t *out_id) {
    int64_t c = 0;
    for (int64_t i = 0; i < m; i++) /* one predicate for both loops: a NaN lower end is in doubt */
        if (!(est[i] - err[i] > U)) c++;
    if (*npairs < c) {
        pair *p = realloc(*pairs, (size_t)c * sizeof(pair));
        if (!p) return HS_ENOMEM;
        *pairs = p, *npairs = c;
    }
    pair *pr = *pairs;
    c = 0;
    for (int64_t i = 0; i < m; i++) {
        if (est[i] - err[i] > U) continue;
        if (c == *npairs) break; /* cannot happen: counted above with the same predicate */
        pr[c].id = ids[i];
        pr[c].d = dist_qx(g, q, 1.0f, X, ids[i]);
        c++;
    }
    qsort(pr, (size_t)c, sizeof(pair), pair_cmp);
    int64_t kept = c < k ? c : k;
    write_hits(g, pr, kept, out_score, out_id);
    for (int64_t i = kept; i < k; i++) {
        out_score[i] = -INFINITY;
        out_id[i] = -1;
    }
    return HS_OK;
}

static int scan_one(const hs_hnsw *g, const float *X, const float *q, int64_t k,
                    const uint64_t *bits, float *ad, float *ae, int32_t *aid, float *heap,
                    pair **pairs, int64_t *npairs, float *out_score, int64_t *out_id) {
    const int64_t d = g->d;
    const int l2 = g->metric == HS_METRIC_L2;
    hs_i8_fn fi8 = hs_dot_i8_impl();
    float qq = hs_dot(q, q, d), qsq = l2 ? qq : 0.0f, qn = sqrtf(qq), q1 = 0.0f;
    for (int64_t j = 0; j < d; j++) q1 += fabsf(q[j]);
    /* float32 rounding of a d-term sum is at most gamma times the sum of its terms' sizes */
    const float gamma = (float)(d + 2) * FLT_EPSILON;
    float half = (l2 ? 2.0f : 1.0f) * q1 * (0.5f + 127.0f * gamma);
    int64_t m = 0, words = (g->n + 63) >> 6, hn = 0;
    for (int64_t w = 0; w < words; w++) { /* the allowed nodes first, so rows can be prefetched */
        uint64_t word = bits ? bits[w] : ~(uint64_t)0;
        while (word) {
            int64_t e = (w << 6) + __builtin_ctzll(word);
            word &= word - 1;
            if (e >= g->n) break;
            if (g->level[e] < 0) {
                if (bits) return HS_EINVAL; /* an allowed row the graph does not hold */
                continue;
            }
            if (g->pending && g->dead[e]) continue;
            aid[m++] = (int32_t)e;
        }
    }
    const int64_t ahead = 24, lines = (d + 63) / 64;
    for (int64_t i = 0; i < m && i < ahead; i++)
        for (int64_t l = 0; l < lines; l++) __builtin_prefetch(g->codes + aid[i] * d + l * 64);
    for (int64_t i = 0; i < m; i++) {
        if (i + ahead < m)
            for (int64_t l = 0; l < lines; l++) __builtin_prefetch(g->codes + aid[i + ahead] * d + l * 64);
        int64_t e = aid[i];
        float dot = g->cscale[e] * fi8(q, g->codes + e * d, d);
        float de = l2 ? qsq - 2.0f * dot + g->csq[e] : -dot;
        ad[i] = de;
        ae[i] = g->cscale[e] * half + gamma * (l2 ? qsq + g->csq[e] : qn * sqrtf(g->csq[e]));
        kth_push(heap, &hn, k, de + ae[i]);
    }
    return rescore_in_doubt(g, X, q, k, ad, ae, aid, m, hn == k ? heap[0] : INFINITY, pairs, npairs,
                            out_score, out_id);
}

/* The RaBitQ codes' exact scan over the allowed nodes: every row's float32 key lies within the
 * hard bound of its estimate, so the rows whose lower end passes the k-th smallest upper end U
 * cannot be in the float top-k; the others are rescored (as scan_one on int8 codes). */
static int rq_scan(const hs_hnsw *g, const float *X, const float *Q, int64_t nq, int64_t k,
                   const uint64_t *bits, float *out_score, int64_t *out_id) {
    int64_t m = 0, npairs = 0;
    int64_t *rows = malloc((size_t)(g->n + 1) * sizeof(int64_t));
    int32_t *ids = malloc((size_t)(g->n + 1) * sizeof(int32_t));
    float *key = malloc((size_t)(g->n + 1) * sizeof(float)), *err = malloc((size_t)(g->n + 1) * sizeof(float));
    float *heap = malloc((size_t)k * sizeof(float));
    pair *pairs = NULL;
    hs_rq_query *qq = hs_rq_query_new(g->d);
    int rc = rows && ids && key && err && heap && qq ? HS_OK : HS_ENOMEM;
    for (int64_t e = 0; e < g->n && rc == HS_OK; e++) {
        if (bits && !((bits[e >> 6] >> (e & 63)) & 1)) continue;
        if (g->level[e] < 0) {
            if (bits) rc = HS_EINVAL; /* an allowed row the graph does not hold */
            continue;
        }
        if (g->pending && g->dead[e]) continue;
        ids[m] = (int32_t)e;
        rows[m++] = e;
    }
    if (m && !g->rq) rc = HS_EINVAL; /* nodes without a context: cannot happen (attach makes one) */
    for (int64_t t = 0; t < nq && rc == HS_OK; t++) {
        const float *q = Q + t * g->d;
        if (m && hs_rq_query_set(qq, g->rq, q)) {
            rc = HS_EINVAL;
            break;
        }
        if (m)
            hs_rq_query_keys(qq, g->rq, g->rqcodes, g->rs, rq_factors(g), g->rs / 4, rows, m, 0.0,
                             HS_RQ_BOUND_HARD, key, err);
        int64_t hn = 0;
        for (int64_t i = 0; i < m; i++) kth_push(heap, &hn, k, key[i] + err[i]);
        rc = rescore_in_doubt(g, X, q, k, key, err, ids, m, hn == k ? heap[0] : INFINITY, &pairs,
                              &npairs, out_score + t * k, out_id + t * k);
    }
    free(rows), free(ids), free(key), free(err), free(heap), free(pairs);
    hs_rq_query_free(qq);
    return rc;
}

int hs_hnsw_scan(const hs_hnsw *g, const float *X, const float *Q, int64_t nq, int64_t k,
                 const uint64_t *bits, int64_t nwords, float *out_score, int64_t *out_id) {
    if (!g->quant) return HS_EINVAL;
    if (k <= 0 || nq <= 0) return HS_OK;
    int64_t cap = 0, words = (g->n + 63) >> 6;
    if (bits) {
        if (nwords < words) return HS_EINVAL;
        for (int64_t w = words ? words - 1 : 0; w < nwords; w++) { /* allowed beyond the graph */
            uint64_t beyond = w >= words ? ~(uint64_t)0 : (g->n & 63) ? ~(uint64_t)0 << (g->n & 63) : 0;
            if (bits[w] & beyond) return HS_EINVAL;
        }
        for (int64_t w = 0; w < words; w++) cap += __builtin_popcountll(bits[w]);
    } else {
        cap = g->n;
    }
    if (is_rq(g)) return rq_scan(g, X, Q, nq, k, bits, out_score, out_id);
    if (cap < 1) cap = 1;
    float *ad = malloc((size_t)cap * sizeof(float)), *ae = malloc((size_t)cap * sizeof(float));
    int32_t *aid = malloc((size_t)cap * sizeof(int32_t));
    float *heap = malloc((size_t)k * sizeof(float));
    pair *pairs = NULL;
    int64_t npairs = 0;
    int rc = (ad && ae && aid && heap) ? HS_OK : HS_ENOMEM;
    for (int64_t i = 0; i < nq && rc == HS_OK; i++)
        rc = scan_one(g, X, Q + i * g->d, k, bits, ad, ae, aid, heap, &pairs, &npairs,
                      out_score + i * k, out_id + i * k);
    free(ad), free(ae), free(aid), free(heap), free(pairs);
    return rc;
}

/* ------------------------------------------------------------ bookkeeping */

int64_t hs_hnsw_count(const hs_hnsw *g) { return g->count; }
int64_t hs_hnsw_pending(const hs_hnsw *g) { return g->pending; }
int64_t hs_hnsw_slots(const hs_hnsw *g) { return g->n; }
int hs_hnsw_m(const hs_hnsw *g) { return g->M; }

int64_t hs_hnsw_nbytes(const hs_hnsw *g) {
    int64_t b = g->cap * ((int64_t)(g->M0 + 1) * 4 + 1 + 1 + 4 + (int64_t)sizeof(int32_t *));
    for (int64_t i = 0; i < g->n; i++)
        if (g->level[i] > 0) b += (int64_t)g->level[i] * (g->M + 1) * 4;
    if (is_i8(g)) b += g->cap * (g->d + 8);
    if (is_rq(g)) b += g->cap * g->rs + (int64_t)RQ_CENTROIDS * g->d * 4 + hs_rq_ctx_nbytes(g->rq);
    if (g->inv) b += g->cap * 4;
    return b;
}

int hs_hnsw_level_of(const hs_hnsw *g, int64_t slot) {
    if (slot < 0 || slot >= g->n || g->dead[slot]) return -1;
    return g->level[slot];
}

int hs_hnsw_links(const hs_hnsw *g, int64_t slot, int lc, int32_t *out) {
    if (hs_hnsw_level_of(g, slot) < lc || lc < 0) return -1;
    const int32_t *l = links_at(g, (int32_t)slot, lc);
    memcpy(out, l + 1, (size_t)l[0] * sizeof(int32_t));
    return l[0];
}

/* ---------------------------------------------------------- serialization */

#define MAGIC "HSHNSW01"
#define HEADER_BYTES 64

static int64_t upper_ints(const hs_hnsw *g) {
    int64_t t = 0;
    for (int64_t i = 0; i < g->n; i++)
        if (g->level[i] > 0) t += (int64_t)g->level[i] * (g->M + 1);
    return t;
}

int64_t hs_hnsw_serialized_size(const hs_hnsw *g) {
    return HEADER_BYTES + g->n + g->n * (int64_t)(g->M0 + 1) * 4 + upper_ints(g) * 4;
}

typedef struct {
    char magic[8];
    int64_t d, n, count;
    int32_t metric, M, efc, quant, entry, max_level;
    uint64_t rng;
} header;

int hs_hnsw_serialize(const hs_hnsw *g, uint8_t *buf, int64_t size) {
    if (g->pending) return HS_EINVAL;
    if (size != hs_hnsw_serialized_size(g)) return HS_EINVAL;
    header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.d = g->d;
    h.n = g->n;
    h.count = g->count;
    h.metric = g->metric;
    h.M = g->M;
    h.efc = g->efc;
    h.quant = g->quant;
    h.entry = g->entry;
    h.max_level = g->max_level;
    h.rng = g->rng;
    memset(buf, 0, HEADER_BYTES);
    memcpy(buf, &h, sizeof h);
    uint8_t *p = buf + HEADER_BYTES;
    memcpy(p, g->level, (size_t)g->n);
    p += g->n;
    memcpy(p, g->links0, (size_t)g->n * (g->M0 + 1) * 4);
    p += g->n * (int64_t)(g->M0 + 1) * 4;
    for (int64_t i = 0; i < g->n; i++) {
        if (g->level[i] <= 0) continue;
        size_t b = (size_t)g->level[i] * (g->M + 1) * 4;
        memcpy(p, g->upper[i], b);
        p += b;
    }
    return HS_OK;
}

/* Levels in range, count, top level and entry consistent -> int32s of upper lists, or -1. */
static int64_t check_levels(const int8_t *lv, int64_t n, int64_t M, int64_t count, int64_t max_level,
                            int64_t entry) {
    int64_t seen = 0, top = -1, upper = 0;
    for (int64_t i = 0; i < n; i++) {
        if (lv[i] < -1 || lv[i] > HS_HNSW_MAX_LEVEL) return -1;
        if (lv[i] >= 0) seen++;
        if (lv[i] > top) top = lv[i];
        if (lv[i] > 0) upper += (int64_t)lv[i] * (M + 1);
    }
    if (seen != count || max_level != top) return -1;
    if (count ? (entry < 0 || entry >= n || lv[entry] != top) : entry != -1) return -1;
    return upper;
}

/* every list: count in range, targets are nodes that reach this level */
static int links_ok(const hs_hnsw *g) {
    const int8_t *lv = g->level;
    for (int64_t i = 0; i < g->n; i++) {
        int l = lv[i];
        if (l < 0 && g->links0[i * (g->M0 + 1)] != 0) return 0;
        for (int lc = 0; lc <= l; lc++) {
            const int32_t *ls = links_at(g, (int32_t)i, lc);
            if (ls[0] < 0 || ls[0] > max_links(g, lc)) return 0;
            for (int j = 0; j < ls[0]; j++) {
                int32_t e = ls[1 + j];
                if (e < 0 || e >= g->n || lv[e] < lc) return 0;
            }
        }
    }
    return 1;
}

hs_hnsw *hs_hnsw_deserialize(const uint8_t *buf, int64_t size, int64_t d, int metric, int quant,
                             int *err) {
    *err = HS_EINVAL;
    header h;
    if (size < HEADER_BYTES) return NULL;
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, MAGIC, 8) != 0 || h.d != d || h.quant != quant ||
        /* a cosine graph saved before cosine was native walked unit vectors with ip: same links */
        !(h.metric == metric || (metric == HS_METRIC_COSINE && h.metric == HS_METRIC_IP)))
        return NULL;
    if (h.M < 2 || h.M > HS_HNSW_MAX_M || h.efc < 1 || h.n < 0 || h.n > INT32_MAX) return NULL;
    int64_t M0 = 2 * (int64_t)h.M;
    if (h.n > (size - HEADER_BYTES) / (1 + (M0 + 1) * 4)) return NULL;
    const int8_t *lv = (const int8_t *)(buf + HEADER_BYTES);
    int64_t upper = check_levels(lv, h.n, h.M, h.count, h.max_level, h.entry);
    if (upper < 0 || HEADER_BYTES + h.n + h.n * (M0 + 1) * 4 + upper * 4 != size) return NULL;

    hs_hnsw *g = hs_hnsw_new(d, metric, h.M, h.efc, h.rng, quant);
    if (!g || hs_hnsw_reserve(g, h.n > 0 ? h.n : 1)) {
        hs_hnsw_free(g);
        *err = HS_ENOMEM;
        return NULL;
    }
    g->n = h.n;
    g->count = h.count;
    g->entry = h.entry;
    g->max_level = h.max_level;
    g->rng = h.rng;
    memcpy(g->level, lv, (size_t)h.n);
    const uint8_t *p = buf + HEADER_BYTES + h.n;
    memcpy(g->links0, p, (size_t)h.n * (M0 + 1) * 4);
    p += h.n * (M0 + 1) * 4;
    for (int64_t i = 0; i < h.n; i++) {
        if (lv[i] <= 0) continue;
        size_t b = (size_t)lv[i] * (h.M + 1) * 4;
        g->upper[i] = malloc(b);
        if (!g->upper[i]) {
            hs_hnsw_free(g);
            *err = HS_ENOMEM;
            return NULL;
        }
        memcpy(g->upper[i], p, b);
        p += b;
    }
    if (!links_ok(g)) {
        hs_hnsw_free(g);
        return NULL;
    }
    indeg_rebuild(g);
    *err = HS_OK;
    return g;
}

int hs_hnsw_parts_get(const hs_hnsw *g, hs_hnsw_parts *p) {
    if (g->pending) return HS_EINVAL;
    memset(p, 0, sizeof *p);
    p->d = g->d, p->n = g->n, p->count = g->count, p->upper_len = upper_ints(g);
    p->metric = g->metric, p->M = g->M, p->efc = g->efc, p->quant = g->quant;
    p->entry = g->entry, p->max_level = g->max_level, p->rng = g->rng;
    p->level = g->level, p->links0 = g->links0, p->inv = g->inv;
    p->codes = g->codes, p->cscale = g->cscale, p->csq = g->csq;
    p->rqcodes = g->rqcodes, p->centroid = g->centroid, p->rq_trained = g->rq_trained;
    p->rq_k = g->rq_k;
    return HS_OK;
}

int hs_hnsw_upper_get(const hs_hnsw *g, int32_t *out, int64_t len) {
    if (len != upper_ints(g)) return HS_EINVAL;
    for (int64_t i = 0; i < g->n; i++) {
        if (g->level[i] <= 0) continue;
        int64_t b = (int64_t)g->level[i] * (g->M + 1);
        memcpy(out, g->upper[i], (size_t)b * 4);
        out += b;
    }
    return HS_OK;
}

hs_hnsw *hs_hnsw_attach(const hs_hnsw_parts *p, const int32_t *upper, int64_t d, int metric,
                        int quant, int *err) {
    *err = HS_EINVAL;
    if (p->d != d || p->quant != quant || p->metric != metric || p->M < 2 || p->M > HS_HNSW_MAX_M ||
        p->efc < 1 || p->n < 0 || p->n > INT32_MAX || !p->level || !p->links0 ||
        (metric == HS_METRIC_COSINE) != (p->inv != NULL) ||
        (quant == HS_HNSW_Q_INT8) != (p->codes != NULL && p->cscale != NULL && p->csq != NULL) ||
        (quant >= HS_HNSW_Q_RQ1) != (p->rqcodes != NULL && p->centroid != NULL) ||
        (quant >= HS_HNSW_Q_RQ1 && ((p->count > 0 && p->rq_trained < 1) || p->rq_k < 1 || p->rq_k > RQ_CENTROIDS)))
        return NULL;
    if (check_levels(p->level, p->n, p->M, p->count, p->max_level, p->entry) != p->upper_len)
        return NULL;
    hs_hnsw *g = hs_hnsw_new(d, metric, p->M, p->efc, p->rng, quant);
    if (!g) return NULL;
    *err = HS_ENOMEM;
    g->cap = p->n;
    g->upper = calloc((size_t)(p->n > 0 ? p->n : 1), sizeof(int32_t *));
    g->dead = calloc((size_t)(p->n > 0 ? p->n : 1), 1);
    g->indeg = calloc((size_t)(p->n > 0 ? p->n : 1), sizeof(int32_t));
    g->borrowed = 1;
    g->level = p->level, g->links0 = p->links0, g->inv = p->inv;
    g->codes = p->codes, g->cscale = p->cscale, g->csq = p->csq;
    g->rqcodes = p->rqcodes;
    if (!g->upper || !g->dead || !g->indeg) goto fail;
    if (quant >= HS_HNSW_Q_RQ1) {
        for (int64_t j = 0; j < p->rq_k * d; j++)
            if (!isfinite(p->centroid[j])) goto bad;
        memcpy(g->centroid, p->centroid, (size_t)(p->rq_k * d) * sizeof(float));
        g->rq_k = p->rq_k;
        g->rq_trained = p->rq_trained;
        for (int64_t i = 0; i < p->n; i++) { /* a row's centroid number picks an array entry */
            const float *f = rq_factors(g) + i * (g->rs / 4);
            float j = f[4];
            if (!(j >= 0 && j < p->rq_k && j == (float)(int)j)) goto bad;
            if (!(isfinite(f[0]) && f[0] >= 0 && isfinite(f[1]) && isfinite(f[2]) && isfinite(f[3]) &&
                  f[3] >= 0 && isfinite(f[5])))
                goto bad;
        }
        if (rq_context(g, g->centroid, g->rq_k)) goto fail; /* even with no node: scans need one */
    }
    g->n = p->n, g->count = p->count, g->entry = p->entry, g->max_level = p->max_level;
    for (int64_t i = 0; i < p->n; i++) {
        if (p->level[i] <= 0) continue;
        int64_t b = (int64_t)p->level[i] * (p->M + 1);
        if (!(g->upper[i] = malloc((size_t)b * 4))) goto fail;
        memcpy(g->upper[i], upper, (size_t)b * 4);
        upper += b;
    }
    *err = HS_EINVAL;
    if (!links_ok(g)) goto fail;
    indeg_rebuild(g);
    *err = HS_OK;
    return g;
bad:
    *err = HS_EINVAL;
fail:
    hs_hnsw_free(g);
    return NULL;
}

void hs_hnsw_set_rescore(hs_hnsw *g, double eps0) { g->rq_eps = eps0 >= 0 ? eps0 : HS_HNSW_RESCORE_EPS; }

void hs_malloc_tune(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}
