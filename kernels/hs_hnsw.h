/* One mutable HNSW graph whose node ids are the caller's row slots.
 *
 * The float32 vectors are NOT owned by the graph: every call receives the
 * caller's contiguous (cap x d) block X, row == slot (one copy of the data,
 * shared with exact search and filters). HS_METRIC_COSINE keeps the vectors as
 * they are and scales each node's dot products by its inverse norm (queries
 * must be unit length). With int8 quantization the graph
 * keeps one int8 code row per node for query traversal and re-scores the
 * final candidates on X.
 *
 * Concurrency: any number of hs_hnsw_search calls may run together; add,
 * remove, repair, reserve and load need exclusive access (the caller's
 * reader-writer lock). add and repair use `nthreads` worker threads inside.
 */
#ifndef HS_HNSW_H
#define HS_HNSW_H

#include "hs_common.h"

#define HS_HNSW_PLAIN 0   /* graph search, the bitset only filters results */
#define HS_HNSW_TWOHOP 1  /* filter-first: only matching nodes are candidates, via 2-hop links */
#define HS_HNSW_MAX_LEVEL 30
#define HS_HNSW_MAX_M 512

/* quant: what the query walk reads */
#define HS_HNSW_Q_NONE 0 /* the float32 rows */
#define HS_HNSW_Q_INT8 1 /* an int8 code row per node; the ef found re-scored on float32 */
#define HS_HNSW_Q_RQ1 2  /* RaBitQ 1-bit codes (hs_rabitq.h); rescored as hs_hnsw_set_rescore says */
#define HS_HNSW_Q_RQ4 3  /* RaBitQ 4-bit codes */
#define HS_HNSW_RESCORE_EPS 1.9 /* RaBitQ's eps0 */
#define HS_HNSW_RQ_SEED 0x5EEDC0DEull /* the codes' rotation: fixed, it only has to ignore the data */

typedef struct hs_hnsw hs_hnsw;

/* metric: HS_METRIC_IP, HS_METRIC_COSINE or HS_METRIC_L2. quant: HS_HNSW_Q_*. NULL on bad
 * arguments or out of memory.
 * With RaBitQ codes the walk ranks by the codes' estimate alone (the float32 block is not read);
 * the candidates it keeps (ef) are rescored on float32 in the order of their probabilistic
 * bound's lower end until that end passes the k-th exact distance. Each node is coded around the
 * nearest of up to 64 k-means centroids of the nodes (l2: one per 1,024 nodes; ip and cosine:
 * one, their mean), re-made with every code when the graph doubles (up to 65,536 nodes). */
hs_hnsw *hs_hnsw_new(int64_t d, int metric, int M, int ef_construct, uint64_t seed, int quant);
void hs_hnsw_free(hs_hnsw *g);

/* Makes room for slots [0, cap). Never shrinks. */
int hs_hnsw_reserve(hs_hnsw *g, int64_t cap);

/* Inserts the nodes `slots` (vectors = rows of X). A slot that is already a
 * node (a removed one not yet repaired included) is re-linked with its (new)
 * vector; other pending removals stay pending (no new link points to them). */
int hs_hnsw_add(hs_hnsw *g, const float *X, const int64_t *slots, int64_t n, int nthreads);

/* Removes nodes: they stop being results at once; links are repaired (and the
 * slots freed) when pending removals exceed a small fraction of the graph, on
 * the next add, or by hs_hnsw_repair. Slots that are not nodes are ignored. */
int hs_hnsw_remove(hs_hnsw *g, const float *X, const int64_t *slots, int64_t n, int nthreads);
int hs_hnsw_repair(hs_hnsw *g, const float *X, int nthreads);

/* k nearest of each of nq queries (rows of Q, already unit length for cosine).
 * bits: allowed slots (NULL = all); mode HS_HNSW_PLAIN / HS_HNSW_TWOHOP.
 * out_score is higher-is-better (dot, or -euclidean for l2), out_id padded
 * with -1. visited (optional, per query) counts distance evaluations. */
int hs_hnsw_search(const hs_hnsw *g, const float *X, const float *Q, int64_t nq, int64_t k,
                   int64_t ef, const uint64_t *bits, int mode, float *out_score,
                   int64_t *out_id, int64_t *visited);

/* The exact k nearest of each query among the allowed nodes (bits; NULL = every node),
 * scanned on the int8 codes and re-scored on the float vectors only where a code's error
 * bound leaves a row in doubt: the same answer as a float scan, reading a quarter of the
 * bytes. bits holds nwords words. Needs a quantized graph (HS_EINVAL otherwise) and every
 * allowed slot a node (HS_EINVAL: scan the float block instead). Output as hs_hnsw_search. */
int hs_hnsw_scan(const hs_hnsw *g, const float *X, const float *Q, int64_t nq, int64_t k,
                 const uint64_t *bits, int64_t nwords, float *out_score, int64_t *out_id);

/* RaBitQ walks: the eps0 of the bound that decides which candidates are rescored (larger:
 * more rows read; INFINITY: every candidate; negative: the default). */
void hs_hnsw_set_rescore(hs_hnsw *g, double eps0);

/* Makes malloc serve every block of 1 MiB or more with its own mapping (glibc; elsewhere a no-op):
 * glibc otherwise raises that threshold after the first large free, and the graph's grown arrays
 * then come from the heap, whose freed space the process keeps (tens of MB after a 1M build).
 * Called once when the module loads; it changes the process's malloc, as the storages want. */
void hs_malloc_tune(void);

/* Bookkeeping. */
int64_t hs_hnsw_count(const hs_hnsw *g);     /* live nodes */
int64_t hs_hnsw_pending(const hs_hnsw *g);   /* removed, not yet repaired */
int64_t hs_hnsw_slots(const hs_hnsw *g);     /* 1 + highest slot ever used */
int hs_hnsw_m(const hs_hnsw *g);
int64_t hs_hnsw_nbytes(const hs_hnsw *g);    /* graph (+ codes) memory */
int hs_hnsw_level_of(const hs_hnsw *g, int64_t slot);  /* -1 if not a node */
/* Copies the level-lc links of a node into out (capacity >= 2M); returns count or -1. */
int hs_hnsw_links(const hs_hnsw *g, int64_t slot, int lc, int32_t *out);

/* Serialization of the structure (no vectors; int8 codes are rebuilt from X
 * after loading with hs_hnsw_requantize). Requires no pending removals. */
int64_t hs_hnsw_serialized_size(const hs_hnsw *g);
int hs_hnsw_serialize(const hs_hnsw *g, uint8_t *buf, int64_t size);
/* Validates everything (sizes, ranges, link targets) before trusting it:
 * *err = HS_EINVAL for a malformed buffer, HS_ENOMEM for out of memory. */
hs_hnsw *hs_hnsw_deserialize(const uint8_t *buf, int64_t size, int64_t d, int metric, int quant,
                             int *err);
int hs_hnsw_requantize(hs_hnsw *g, const float *X);

/* The graph as flat arrays, for a snapshot that is mapped back rather than parsed. */
typedef struct {
    int64_t d, n, count, upper_len; /* upper_len: int32s of the upper-level lists */
    int32_t metric, M, efc, quant, entry, max_level;
    uint64_t rng;
    int8_t *level;       /* n */
    int32_t *links0;     /* n x (2M + 1) */
    float *inv;          /* n, cosine only (else NULL) */
    int8_t *codes;       /* n x d, int8 only (else NULL) */
    float *cscale, *csq; /* n each, int8 only (else NULL) */
    uint8_t *rqcodes;    /* n rows of the code bytes then HS_RQ_NFACT floats, RaBitQ only (else NULL) */
    float *centroid;     /* rq_k x d, RaBitQ only (copied by attach) */
    int32_t rq_k;        /* centroids in use (1..64) */
    int64_t rq_trained;  /* nodes the centroid is the mean of (0: none yet) */
} hs_hnsw_parts;

/* Fills p with views of the graph's own arrays (valid until its next write) and the header
 * fields; HS_EINVAL with pending removals. */
int hs_hnsw_parts_get(const hs_hnsw *g, hs_hnsw_parts *p);
/* The upper-level lists of every node with level > 0, in slot order (upper_len int32s). */
int hs_hnsw_upper_get(const hs_hnsw *g, int32_t *out, int64_t len);
/* A graph over the caller's arrays in p (borrowed: written in place, never freed or
 * reallocated; the first growth copies them), the upper lists copied from `upper`. Everything
 * is validated as in hs_hnsw_deserialize; *err as there. */
hs_hnsw *hs_hnsw_attach(const hs_hnsw_parts *p, const int32_t *upper, int64_t d, int metric,
                        int quant, int *err);

#endif
