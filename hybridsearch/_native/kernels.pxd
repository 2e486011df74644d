# Declarations of the plain-C kernels in kernels/ (no Python inside them).
from libc.stdint cimport int64_t, int32_t, uint64_t, uint32_t, uint8_t, int8_t

cdef extern from "hs_common.h":
    int HS_OK, HS_ENOMEM, HS_EINVAL
    int HS_METRIC_IP, HS_METRIC_COSINE, HS_METRIC_L2

cdef extern from "hs_distance.h":
    int hs_simd_level() nogil
    int hs_simd_force(int level) nogil
    int hs_simd_available(int level) nogil
    float hs_dot(const float *a, const float *b, int64_t d) nogil
    float hs_l2sq(const float *a, const float *b, int64_t d) nogil
    void hs_dot_rows(const float *X, int64_t d, const int64_t *rows, int64_t n,
                     int64_t row0, const float *q, float *out) nogil
    void hs_l2sq_rows(const float *X, int64_t d, const int64_t *rows, int64_t n,
                      int64_t row0, const float *q, float *out) nogil
    double hs_stream_sum(const float *x, int64_t n) nogil
    float hs_dot_i8(const float *q, const int8_t *c, int64_t d) nogil
    void hs_dot_i8_rows(const int8_t *C, int64_t d, const int64_t *rows, int64_t n,
                        int64_t row0, const float *q, float *out) nogil

cdef extern from "hs_topk.h":
    int64_t hs_topk_f32(const float *scores, int64_t n, int64_t k, float *out_score,
                        int64_t *out_id) nogil

cdef extern from "hs_bitset.h":
    int64_t hs_bitset_popcount(const uint64_t *b, int64_t nwords) nogil
    int64_t hs_bitset_to_indices(const uint64_t *b, int64_t nwords, int64_t limit,
                                 int64_t *out) nogil

cdef extern from "hs_hash.h":
    uint64_t hs_hash_bytes(const uint8_t *p, int64_t n) nogil
    int hs_hash_spans(const uint8_t *data, int64_t size, const int64_t *start, const int32_t *len,
                      int64_t n, int64_t *out) nogil

cdef extern from "hs_filter.h":
    int HS_F_I64, HS_F_F64, HS_F_CODE, HS_F_PRESENT, HS_F_BITS, HS_F_ALL, HS_F_NONE
    int HS_F_AND, HS_F_OR, HS_F_NOT
    ctypedef struct hs_filter_instr:
        int32_t op
        int32_t cmp
        int64_t nargs
        const void *col
        const uint8_t *present
        int64_t ival
        double fval
        const uint8_t *table
        int64_t table_len
        const uint64_t *bits
    int hs_filter_eval(const hs_filter_instr *prog, int64_t nprog, int64_t n,
                       const uint64_t *live, uint64_t *out) nogil

cdef extern from "hs_exact.h":
    int hs_exact_search(const float *X, int64_t n, int64_t d, const float *xaux,
                        const float *Q, int64_t nq, int metric, const uint64_t *bits,
                        int64_t k, float *out_scores, int64_t *out_ids) nogil

cdef extern from "hs_hnsw.h":
    ctypedef struct hs_hnsw:
        pass
    int HS_HNSW_PLAIN, HS_HNSW_TWOHOP
    int HS_HNSW_Q_NONE, HS_HNSW_Q_INT8, HS_HNSW_Q_RQ1, HS_HNSW_Q_RQ4
    double HS_HNSW_RESCORE_EPS
    void hs_hnsw_set_rescore(hs_hnsw *g, double eps0) nogil
    void hs_malloc_tune() nogil
    hs_hnsw *hs_hnsw_new(int64_t d, int metric, int M, int ef_construct, uint64_t seed, int quant) nogil
    void hs_hnsw_free(hs_hnsw *g) nogil
    int hs_hnsw_reserve(hs_hnsw *g, int64_t cap) nogil
    int hs_hnsw_add(hs_hnsw *g, const float *X, const int64_t *slots, int64_t n, int nthreads) nogil
    int hs_hnsw_remove(hs_hnsw *g, const float *X, const int64_t *slots, int64_t n, int nthreads) nogil
    int hs_hnsw_repair(hs_hnsw *g, const float *X, int nthreads) nogil
    int hs_hnsw_search(const hs_hnsw *g, const float *X, const float *Q, int64_t nq, int64_t k,
                       int64_t ef, const uint64_t *bits, int mode, float *out_score,
                       int64_t *out_id, int64_t *visited) nogil
    int hs_hnsw_scan(const hs_hnsw *g, const float *X, const float *Q, int64_t nq, int64_t k,
                     const uint64_t *bits, int64_t nwords, float *out_score, int64_t *out_id) nogil
    int64_t hs_hnsw_count(const hs_hnsw *g) nogil
    int64_t hs_hnsw_pending(const hs_hnsw *g) nogil
    int64_t hs_hnsw_slots(const hs_hnsw *g) nogil
    int hs_hnsw_m(const hs_hnsw *g) nogil
    int64_t hs_hnsw_nbytes(const hs_hnsw *g) nogil
    int hs_hnsw_level_of(const hs_hnsw *g, int64_t slot) nogil
    int hs_hnsw_links(const hs_hnsw *g, int64_t slot, int lc, int32_t *out) nogil
    int64_t hs_hnsw_serialized_size(const hs_hnsw *g) nogil
    int hs_hnsw_serialize(const hs_hnsw *g, uint8_t *buf, int64_t size) nogil
    hs_hnsw *hs_hnsw_deserialize(const uint8_t *buf, int64_t size, int64_t d, int metric, int quant,
                                 int *err) nogil
    int hs_hnsw_requantize(hs_hnsw *g, const float *X) nogil
    ctypedef struct hs_hnsw_parts:
        int64_t d, n, count, upper_len
        int32_t metric, M, efc, quant, entry, max_level
        uint64_t rng
        int8_t *level
        int32_t *links0
        float *inv
        int8_t *codes
        float *cscale
        float *csq
        uint8_t *rqcodes
        float *centroid
        int32_t rq_k
        int64_t rq_trained
    int hs_hnsw_parts_get(const hs_hnsw *g, hs_hnsw_parts *p) nogil
    int hs_hnsw_upper_get(const hs_hnsw *g, int32_t *out, int64_t len) nogil
    hs_hnsw *hs_hnsw_attach(const hs_hnsw_parts *p, const int32_t *upper, int64_t d, int metric,
                            int quant, int *err) nogil

cdef extern from "hs_invindex.h":
    ctypedef struct hs_inv:
        pass
    hs_inv *hs_inv_new() nogil
    void hs_inv_free(hs_inv *ix) nogil
    int hs_inv_add(hs_inv *ix, const int64_t *slots, int64_t n, const int32_t *tids, const int64_t *offs) nogil
    int hs_inv_remove(hs_inv *ix, const int64_t *slots, int64_t n) nogil
    int64_t hs_inv_search(const hs_inv *ix, const int32_t *qt, const float *qw, int64_t nq, int64_t k,
                          float k1, float b, const uint64_t *bits, int64_t nbits, int exhaustive,
                          float *out_score, int64_t *out_slot) nogil
    int64_t hs_inv_search_best(const hs_inv *const *ix, int64_t nf, const int32_t *const *qt,
                               const float *const *qw, const int64_t *nq, int64_t k, float k1, float b,
                               const uint64_t *bits, int64_t nbits, float *out_score, int64_t *out_slot) nogil
    int hs_inv_score(const hs_inv *ix, const int32_t *qt, const float *qw, int64_t nq, float k1, float b,
                     const int64_t *slots, int64_t n, float *out) nogil
    int64_t hs_inv_matches(const hs_inv *ix, const int32_t *qt, int64_t nq, const uint64_t *bits,
                           int64_t nbits, int64_t *out, int64_t cap, int64_t *total) nogil
    int64_t hs_inv_docs(const hs_inv *ix) nogil
    int64_t hs_inv_df(const hs_inv *ix, int32_t t) nogil
    int64_t hs_inv_total_len(const hs_inv *ix) nogil
    int64_t hs_inv_nbytes(const hs_inv *ix) nogil
    int64_t hs_inv_borrowed_nbytes(const hs_inv *ix) nogil
    int HS_CL_TERM, HS_CL_PHRASE, HS_CL_ANY
    int HS_OCCUR_SHOULD, HS_OCCUR_MUST, HS_OCCUR_MUST_NOT
    ctypedef struct hs_inv_clause:
        int32_t kind
        int32_t occur
        const int32_t *terms
        int64_t nterms
        float weight
    int64_t hs_inv_query(const hs_inv *const *ix, int64_t nf, const hs_inv_clause *const *cl, const int64_t *ncl,
                         float k1, float b, const uint64_t *bits, int64_t nbits, int64_t k, float *out_score,
                         int64_t *out_slot, int64_t **all_slot, float **all_score, int64_t *total) nogil
    ctypedef struct hs_inv_flat:
        int64_t nterms, nslots, npost, npos
        int64_t N, total
        int64_t *term_off
        int32_t *post_doc
        int32_t *post_tf
        int32_t *term_max_tf
        int32_t *term_min_dl
        int64_t *slot_off
        int32_t *fwd_tid
        int32_t *fwd_tf
        int32_t *doc_len
        int64_t *pos_off
        uint8_t *fwd_pos
    void hs_inv_export_sizes(const hs_inv *ix, hs_inv_flat *out) nogil
    int hs_inv_export(const hs_inv *ix, const hs_inv_flat *out) nogil
    hs_inv *hs_inv_attach(const hs_inv_flat *f, int *err, const char **why) nogil

cdef extern from "hs_lexicon.h":
    ctypedef struct hs_lex:
        pass
    ctypedef struct hs_lex_batch:
        int32_t *tids
        int64_t ntok
        int64_t *doc_offs
        uint8_t *new_buf
        int64_t *new_offs
        int64_t nnew
    hs_lex *hs_lex_new() nogil
    void hs_lex_free(hs_lex *lx) nogil
    int64_t hs_lex_size(const hs_lex *lx) nogil
    int32_t hs_lex_get(const hs_lex *lx, const uint8_t *p, int64_t n) nogil
    int hs_lex_put(hs_lex *lx, const uint8_t *buf, const int64_t *offs, const int32_t *ids, int64_t n) nogil
    int hs_lex_tokenize(const hs_lex *lx, const uint8_t *buf, const int64_t *offs, const uint8_t *presplit,
                        int64_t n, int lowercase, hs_lex_batch *out) nogil
    int hs_lex_resolve(hs_lex *lx, hs_lex_batch *b, const int32_t *ids) nogil
    void hs_lex_batch_free(hs_lex_batch *b) nogil

cdef extern from "hs_rwlock.h":
    ctypedef struct hs_rwlock:
        int64_t readers
        int64_t waiting_readers
        int64_t waiting_writers
        int writer
        uint64_t generation
    int hs_rwlock_init(hs_rwlock *l) nogil
    void hs_rwlock_destroy(hs_rwlock *l) nogil
    int hs_rwlock_try_read(hs_rwlock *l) nogil
    void hs_rwlock_read(hs_rwlock *l) nogil
    void hs_rwlock_read_unlock(hs_rwlock *l) nogil
    void hs_rwlock_write(hs_rwlock *l) nogil
    void hs_rwlock_write_unlock(hs_rwlock *l) nogil

cdef extern from "hs_maxsim.h":
    int HS_MAXSIM_MAX_ROWS
    ctypedef struct hs_mv_store:
        const float *rows
        const float *inv_norm
        const float *sq_norm
        const int64_t *row_slot
        const int64_t *slot_off
        const int32_t *slot_cnt
        int64_t n_rows, n_slots, d
    int hs_maxsim_top_k(const hs_mv_store *st, const float *Q, int64_t m, int metric,
                        const uint64_t *bits, int64_t nwords, int64_t k, float *out_score,
                        int64_t *out_slot, int64_t *kept) nogil
    int hs_maxsim_of(const hs_mv_store *st, const int64_t *slots, int64_t n, const float *Q,
                     int64_t m, int metric, float *out) nogil
cdef extern from "hs_sparse.h":
    ctypedef struct hs_sp:
        pass
    int HS_SP_BLOCK, HS_SP_WINDOW
    hs_sp *hs_sp_new() nogil
    void hs_sp_free(hs_sp *ix) nogil
    int hs_sp_add(hs_sp *ix, const int64_t *slots, int64_t n, const int64_t *indptr, const int32_t *keys,
                  const float *vals, const char **why) nogil
    int hs_sp_remove(hs_sp *ix, const int64_t *slots, int64_t n) nogil
    int64_t hs_sp_search(const hs_sp *ix, const int32_t *qk, const float *qv, int64_t nq, int64_t k,
                         const uint64_t *bits, int64_t nbits, int prune, float *out_score, int64_t *out_slot,
                         int64_t *work) nogil
    int hs_sp_search_batch(const hs_sp *ix, const int64_t *qptr, int64_t nqueries, const int32_t *qk,
                           const float *qv, int64_t k, const uint64_t *bits, int64_t nbits, int nthreads,
                           float *out_score, int64_t *out_slot, int64_t *nhits) nogil
    int hs_sp_score(const hs_sp *ix, const int32_t *qk, const float *qv, int64_t nq, const int64_t *slots,
                    int64_t n, float *out) nogil
    int64_t hs_sp_matches(const hs_sp *ix, const int32_t *qk, int64_t nq, const uint64_t *bits, int64_t nbits,
                          int64_t *out, int64_t cap, int64_t *total) nogil
    int64_t hs_sp_docs(const hs_sp *ix) nogil
    int64_t hs_sp_nnz(const hs_sp *ix) nogil
    int64_t hs_sp_keys(const hs_sp *ix) nogil
    int64_t hs_sp_nbytes(const hs_sp *ix) nogil
    int32_t hs_sp_doc(const hs_sp *ix, int64_t slot, int32_t *keys, float *vals) nogil
    void hs_sp_export_sizes(const hs_sp *ix, int64_t *ndocs, int64_t *nnz) nogil
    int hs_sp_export(const hs_sp *ix, int64_t ndocs, int64_t nnz, int64_t *slots, int64_t *indptr,
                     int32_t *keys, float *vals) nogil

cdef extern from "hs_rabitq.h":
    int HS_RQ_NFACT, HS_RQ_CTX_NFACT, HS_RQ_BOUND_PROB, HS_RQ_BOUND_HARD
    ctypedef struct hs_rq_params:
        int64_t d
        int bits
        int metric
        uint64_t seed
        const float *centroid
    int64_t hs_rq_dp(int64_t d) nogil
    int64_t hs_rq_code_bytes(int64_t d, int bits) nogil
    int hs_rq_rotate(int64_t d, uint64_t seed, const float *X, int64_t n, double *out) nogil
    int hs_rq_encode(const hs_rq_params *p, const float *X, int64_t n, uint8_t *codes,
                     float *factors) nogil
    int hs_rq_estimate(const hs_rq_params *p, const uint8_t *codes, const float *factors,
                       const int64_t *rows, int64_t n, const float *Q, int64_t nq, double eps0,
                       float *est, float *bprob, float *bhard) nogil
    int hs_rq_scan(const hs_rq_params *p, const uint8_t *codes, const float *factors, int64_t n,
                   const float *X, const uint64_t *bits, const float *Q, int64_t nq, int64_t k,
                   int bound, double eps0, float *out_scores, int64_t *out_ids,
                   int64_t *rescored) nogil
cdef extern from "hs_ingest.h":
    int64_t hs_group_spans(const uint8_t *data, int64_t size, const int64_t *start, const int32_t *len,
                           int64_t n, int64_t *hash, int32_t *group, int64_t *first, int64_t *last) nogil
    int hs_spans_equal(const uint8_t *a, int64_t asize, const int64_t *astart, const int32_t *alen,
                       const uint8_t *b, int64_t bsize, const int64_t *bstart, const int32_t *blen,
                       int64_t n, uint8_t *out) nogil
    int64_t hs_rows_norm2(const float *x, int64_t n, int64_t d, double *norm2) nogil
    int hs_sort_pairs(int64_t *keys, int64_t *vals, int64_t n) nogil
