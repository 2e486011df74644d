/* A mutable inverted index over one text field, with exact BM25 top-k.
 *
 * Documents are identified by the caller's slots; terms by the caller's term
 * ids (a dictionary kept in Python). Postings are sorted by slot and updated in
 * place, so a write is visible to the next search and the statistics (document
 * count, document frequencies, total length) are exact under deletes.
 *
 * BM25 as Lucene defines it (without its lossy length encoding):
 *   idf = ln(1 + (N - n + 0.5) / (n + 0.5)),  N = documents with >= 1 token,
 *   term score = idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)),
 * summed over the query terms, each weighted by its number of occurrences.
 * Not thread-safe for writes: the caller's reader-writer lock serialises them.
 */
#ifndef HS_INVINDEX_H
#define HS_INVINDEX_H

#include "hs_common.h"

typedef struct hs_inv hs_inv;

hs_inv *hs_inv_new(void);
void hs_inv_free(hs_inv *ix);

/* Indexes n documents: document i is slot slots[i] with the term ids
 * tids[offs[i] .. offs[i+1]) (repeats = term frequency). A slot already
 * indexed is replaced. */
int hs_inv_add(hs_inv *ix, const int64_t *slots, int64_t n, const int32_t *tids, const int64_t *offs);
/* Removes documents (slots not indexed are ignored). */
int hs_inv_remove(hs_inv *ix, const int64_t *slots, int64_t n);

/* Exact top-k of one query (terms qt with weights qw). bits: allowed slots
 * (NULL = all). exhaustive != 0 scores every matching document (the
 * reference); otherwise MaxScore skips documents that cannot enter the top-k.
 * Returns the number of hits (<= k); pads with (-inf, -1). */
int64_t hs_inv_search(const hs_inv *ix, const int32_t *qt, const float *qw, int64_t nq, int64_t k,
                      float k1, float b, const uint64_t *bits, int64_t nbits, int exhaustive,
                      float *out_score, int64_t *out_slot);
/* Best-fields top-k over nf indexes (one per text field; field f queried with
 * qt[f] / qw[f], nq[f] terms, 0 = the query has no term there): a document's
 * score is its best field's BM25. Ties go to the lower slot. Returns the number
 * of hits (<= k) or -error; pads with (-inf, -1). */
int64_t hs_inv_search_best(const hs_inv *const *ix, int64_t nf, const int32_t *const *qt,
                           const float *const *qw, const int64_t *nq, int64_t k, float k1, float b,
                           const uint64_t *bits, int64_t nbits, float *out_score, int64_t *out_slot);
/* BM25 of the given slots (0 where a slot has none of the terms). */
int hs_inv_score(const hs_inv *ix, const int32_t *qt, const float *qw, int64_t nq, float k1, float b,
                 const int64_t *slots, int64_t n, float *out);
/* Every slot matching at least one term (and bits), ascending; returns the count
 * written (at most cap) and the total through *total. */
int64_t hs_inv_matches(const hs_inv *ix, const int32_t *qt, int64_t nq, const uint64_t *bits,
                       int64_t nbits, int64_t *out, int64_t cap, int64_t *total);

int64_t hs_inv_docs(const hs_inv *ix);         /* N */
int64_t hs_inv_df(const hs_inv *ix, int32_t t);
int64_t hs_inv_total_len(const hs_inv *ix);
int64_t hs_inv_nbytes(const hs_inv *ix);      /* postings + forward lists, allocated */

#endif
