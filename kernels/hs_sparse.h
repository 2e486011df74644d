/* A mutable inverted index over one sparse-vector field (SPLADE-style learned sparse vectors),
 * with exact dot-product top-k.
 *
 * Documents are the caller's slots (0 .. INT32_MAX-1); a document is a set of keys (ints in
 * [0, 2^31)) with weights (finite, > 0). Its score for a query (keys with weights > 0) is the
 * sum over the shared keys of query weight x document weight, accumulated in double and
 * rounded once to float. A document sharing no key with the query is not a match.
 *
 * Layout: a hash table maps each key to a term; a term's postings are (slot, weight) ascending
 * by slot, with the maximum weight of every block of HS_SP_BLOCK postings, kept exact under
 * inserts and deletes. Each slot keeps its forward list (keys ascending, weights), which
 * removes and rescoring read. Writes are visible to the next search.
 *
 * Search (hs_sp_search): slots are visited in windows of HS_SP_WINDOW. Per window every query
 * term gets a bound, its query weight times the largest block maximum of its postings there;
 * a window whose bounds sum below the current k-th score is skipped, and otherwise the terms
 * whose bounds' prefix sum stays below it are "non-essential" (MaxScore): the others are
 * accumulated term at a time into the window's accumulator, and only the documents they reach
 * that can still enter the top-k probe the non-essential ones. Exact: the result equals the
 * exhaustive evaluation (ties to the lower slot).
 *
 * Not thread-safe for writes: the caller's reader-writer lock serialises them; searches only
 * read (any number at once). */
#ifndef HS_SPARSE_H
#define HS_SPARSE_H

#include "hs_common.h"

#define HS_SP_BLOCK 64    /* postings per block maximum */
#define HS_SP_WINDOW 4096 /* slots per search window (a multiple of 64) */

typedef struct hs_sp hs_sp;

hs_sp *hs_sp_new(void);
void hs_sp_free(hs_sp *ix);

/* Indexes n documents: document i is slot slots[i] with keys[indptr[i] .. indptr[i+1]) (strictly
 * ascending, >= 0) and their weights vals[...] (finite, > 0); an empty document removes the slot.
 * A slot already indexed is replaced; a slot given twice keeps its last document. The whole
 * batch is checked first: on HS_EINVAL (*why, may be NULL, a static sentence) nothing changed.
 * Memory is reserved before the first change, so HS_ENOMEM leaves the documents as they were. */
int hs_sp_add(hs_sp *ix, const int64_t *slots, int64_t n, const int64_t *indptr, const int32_t *keys,
              const float *vals, const char **why);
/* Removes the documents of these slots (slots not indexed, or negative, are ignored). */
int hs_sp_remove(hs_sp *ix, const int64_t *slots, int64_t n);

/* Exact top-k of one query (keys qk strictly ascending >= 0, weights qv finite > 0; HS_EINVAL
 * otherwise) among the slots set in bits (NULL = all; slots >= nbits are not allowed). Best first
 * into out_score / out_slot (k entries, padded with -inf / -1); returns the number of hits or a
 * negative error. prune = 0 accumulates every posting of the query's terms (the reference the
 * pruning is checked against). *work (may be NULL) += postings read. */
int64_t hs_sp_search(const hs_sp *ix, const int32_t *qk, const float *qv, int64_t nq, int64_t k,
                     const uint64_t *bits, int64_t nbits, int prune, float *out_score, int64_t *out_slot,
                     int64_t *work);
/* nqueries queries in CSR form (query i: qk / qv [qptr[i], qptr[i+1])), each as hs_sp_search,
 * on up to nthreads threads: out_score / out_slot are (nqueries, k) row-major, nhits[i] the hits
 * of query i. Every query is checked before any runs. */
int hs_sp_search_batch(const hs_sp *ix, const int64_t *qptr, int64_t nqueries, const int32_t *qk, const float *qv,
                       int64_t k, const uint64_t *bits, int64_t nbits, int nthreads, float *out_score,
                       int64_t *out_slot, int64_t *nhits);
/* The exact score of each given slot (0 where it is not indexed or shares no key; slots out of
 * range are not indexed). The query as in hs_sp_search. */
int hs_sp_score(const hs_sp *ix, const int32_t *qk, const float *qv, int64_t nq, const int64_t *slots, int64_t n,
                float *out);
/* Slots sharing a key with the query (keys strictly ascending) and set in bits, ascending: writes
 * at most cap of them, returns how many it wrote, and the total through *total. */
int64_t hs_sp_matches(const hs_sp *ix, const int32_t *qk, int64_t nq, const uint64_t *bits, int64_t nbits,
                      int64_t *out, int64_t cap, int64_t *total);

int64_t hs_sp_docs(const hs_sp *ix);   /* slots with at least one key */
int64_t hs_sp_nnz(const hs_sp *ix);    /* postings */
int64_t hs_sp_keys(const hs_sp *ix);   /* distinct keys with at least one posting */
int64_t hs_sp_nbytes(const hs_sp *ix); /* memory allocated */
/* The document of one slot: its number of keys (0: not indexed); with keys / vals non-NULL
 * (room for that many) also the entries. */
int32_t hs_sp_doc(const hs_sp *ix, int64_t slot, int32_t *keys, float *vals);

/* The index as CSR (what hs_sp_add takes back): the indexed slots ascending (ndocs), indptr
 * (ndocs + 1, from 0), keys / vals (nnz), each slot's keys ascending. */
void hs_sp_export_sizes(const hs_sp *ix, int64_t *ndocs, int64_t *nnz);
int hs_sp_export(const hs_sp *ix, int64_t ndocs, int64_t nnz, int64_t *slots, int64_t *indptr, int32_t *keys,
                 float *vals);

#endif
