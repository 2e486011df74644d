/* A mutable inverted index over one text field, with exact BM25 top-k.
 *
 * Documents are identified by the caller's slots; terms by the caller's term
 * ids (a dictionary kept in Python). Each document also keeps its token
 * positions (for phrases). Postings are sorted by slot and updated in
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
int64_t hs_inv_nbytes(const hs_inv *ix);      /* postings + forward lists, allocated (owned) */
/* Bytes of postings and forward lists still read from attached arrays (0 unless attached). */
int64_t hs_inv_borrowed_nbytes(const hs_inv *ix);

/* ------------------------------------------------------------- boolean queries
 * Clauses as Lucene's BooleanQuery combines them, over phrases, terms and term sets. */
#define HS_CL_TERM 0   /* one term: BM25 */
#define HS_CL_PHRASE 1 /* terms at consecutive positions: BM25 with the phrase frequency as tf
                        * and the sum of the terms' idf (Lucene's PhraseQuery under BM25) */
#define HS_CL_ANY 2    /* any of the terms (a prefix's expansion): a constant score, as Lucene's
                        * constant-score rewrite of a multi-term query */
#define HS_OCCUR_SHOULD 0
#define HS_OCCUR_MUST 1
#define HS_OCCUR_MUST_NOT 2

typedef struct {
    int32_t kind, occur;
    const int32_t *terms; /* TERM: 1; PHRASE: >= 1 in query order (repeats allowed); ANY: >= 0 */
    int64_t nterms;
    float weight; /* TERM / PHRASE: multiplies the BM25 (query occurrences x field weight);
                   * ANY: the score itself */
} hs_inv_clause;

/* Best-fields boolean query over nf indexes (one per text field; field f has the clauses
 * cl[f][0 .. ncl[f])). A document is excluded when a MUST_NOT clause of any field matches it.
 * Otherwise field f matches it when every MUST clause of f matches there and, if f has no MUST
 * clause, at least one SHOULD clause does; f scores the sum of its matching clauses (a field
 * with neither kind matches nothing). The document's score is its best matching field's; it
 * matches if some field does (and it is set in bits, NULL = all).
 * k >= 0: the top-k best first into out_score / out_slot (ties to the lower slot, padded with
 * -inf / -1), returning the number of hits; k < 0: every match ascending by slot into
 * *all_slot / *all_score (malloc'd, the caller frees them; NULL when there is none), returning
 * their number. *total (may be NULL) = the number of matches for k <= 0; -1 for k > 0, where
 * each field's top-k is found with phrases skipping the candidates that cannot enter it (their
 * positions are never read), and the union of those is scored in every field. Returns
 * HS_ENOMEM (< 0) on failure, with nothing to free. */
int64_t hs_inv_query(const hs_inv *const *ix, int64_t nf, const hs_inv_clause *const *cl, const int64_t *ncl,
                     float k1, float b, const uint64_t *bits, int64_t nbits, int64_t k, float *out_score,
                     int64_t *out_slot, int64_t **all_slot, float **all_score, int64_t *total);

/* The index as flat arrays, so a snapshot file can be mapped and attached instead
 * of parsed. P = npost = number of distinct (document, term) pairs; every
 * posting (term t, slot s, tf) appears once in each of the two views:
 *
 *   term_off     int64[nterms+1]  term t's postings are [term_off[t], term_off[t+1])
 *   post_doc     int32[P]         slots, strictly ascending within each term
 *   post_tf      int32[P]         term frequencies (>= 1)
 *   term_max_tf  int32[nterms]    an upper bound of the term's tf (never lowered by deletes)
 *   term_min_dl  int32[nterms]    a lower bound (>= 1) of the lengths of the term's documents
 *   slot_off     int64[nslots+1]  slot s's forward list is [slot_off[s], slot_off[s+1])
 *   fwd_tid      int32[P]         the slot's distinct term ids, strictly ascending
 *   fwd_tf       int32[P]         their term frequencies
 *   doc_len      int32[nslots]    document length = sum of the slot's fwd_tf (0 = not indexed)
 *   pos_off      int64[nslots+1]  slot s's token positions are the bytes [pos_off[s], pos_off[s+1])
 *   fwd_pos      uint8[npos]      per slot, the positions of its fwd_tid in that order (tf each,
 *                                 ascending), each w = 1, 2 or 4 bytes (native order): the least
 *                                 that holds doc_len - 1 (1 up to 256 tokens, 2 up to 65,536);
 *                                 together a permutation of 0 .. doc_len-1
 *   N, total                      documents with doc_len > 0, sum of doc_len
 *
 * nterms / nslots are 1 + the highest term / slot that was ever used (trailing
 * unused entries are left out). The pointers are not const because export
 * writes through them; attach never does. */
typedef struct {
    int64_t nterms, nslots, npost, npos;
    int64_t N, total;
    int64_t *term_off;
    int32_t *post_doc, *post_tf;
    int32_t *term_max_tf, *term_min_dl;
    int64_t *slot_off;
    int32_t *fwd_tid, *fwd_tf;
    int32_t *doc_len;
    int64_t *pos_off;
    uint8_t *fwd_pos;
} hs_inv_flat;

/* Fills nterms, nslots, npost, npos, N and total (the pointers are left alone). */
void hs_inv_export_sizes(const hs_inv *ix, hs_inv_flat *out);
/* Fills the arrays of out, sized as hs_inv_export_sizes said (HS_EINVAL otherwise). */
int hs_inv_export(const hs_inv *ix, const hs_inv_flat *out);
/* An index over the caller's arrays, without copying the postings or forward
 * lists: each array holds exactly the entries its size in f says. They are
 * borrowed: never written or freed, and they must stay valid and unchanged for
 * the life of the index. The first write to a borrowed posting list copies it to
 * malloc'd memory; a borrowed forward list is only ever replaced, never edited.
 * Everything is validated first (offsets, ranges, order, tf >= 1, the two views
 * holding the same pairs, doc_len, N, total, the max_tf / min_dl bounds, the
 * positions): one pass over the postings, one over the forward lists and one over
 * the positions. On failure returns NULL
 * with *err = HS_EINVAL or HS_ENOMEM and *why (may be NULL) a static sentence. */
hs_inv *hs_inv_attach(const hs_inv_flat *f, int *err, const char **why);

#endif
