/* The inverted index's private layout, shared by hs_invindex.c (writes, top-k, export/attach)
 * and hs_invquery.c (boolean queries with phrases). Not part of the kernels' API. */
#ifndef HS_INVINDEX_IMPL_H
#define HS_INVINDEX_IMPL_H

#include <string.h>

#include "hs_gallop.h"
#include "hs_invindex.h"

typedef struct {
    int32_t *doc, *tf;
    int64_t len, cap; /* cap < 0: doc/tf are borrowed (hs_inv_attach): never written, freed or grown */
    int32_t max_tf;   /* never lowered: stays an upper bound after deletes */
    int32_t min_dl;
} plist;

/* A document's forward list: its distinct terms ascending with their tf, then its token
 * positions grouped by term in the same order (the tf[j] positions of tid[j], ascending), each
 * pos_width(dl) bytes wide. Owned lists are one malloc'd block [tid | tf | positions] starting at
 * tid, so the positions of an owned list start right after tf; a borrowed list's positions are in
 * the attached fwd_pos array at pos_off[slot]. Positions are stored doc-major (not per posting, as
 * Lucene does) because a document is written once and replaced whole, while a posting list is
 * edited in place: keeping positions out of the postings keeps those edits as cheap as before. */
typedef struct {
    int32_t *tid, *tf; /* the document's distinct terms, ascending */
    int32_t n;
    int32_t dl; /* 0: not indexed */
} fwd;

struct hs_inv {
    plist *terms;
    int64_t nterms;
    fwd *docs;
    int64_t ndocs_cap;
    int64_t N, total;
    /* Forward lists are never edited in place (a re-add replaces the whole list),
     * so a borrowed one only has to be recognised, not copied: it is one whose tid
     * lies in the caller's fwd_tid array [fwd_lo, fwd_hi). Costs no per-slot flag. */
    uintptr_t fwd_lo, fwd_hi;
    /* the attached positions (borrowed lists only): slot s's bytes start at pos_base + pos_off[s] */
    const uint8_t *pos_base;
    const int64_t *pos_off;
};

static inline int plist_borrowed(const plist *p) { return p->cap < 0; }

static inline int fwd_borrowed(const hs_inv *ix, const fwd *f) {
    uintptr_t a = (uintptr_t)f->tid;
    return a >= ix->fwd_lo && a < ix->fwd_hi;
}

/* Bytes per position of a document of dl tokens: the narrowest width holding 0 .. dl-1, so an
 * 8-word title costs one byte per token and random access needs no decoding. */
static inline int pos_width(int64_t dl) { return dl <= 256 ? 1 : dl <= 65536 ? 2 : 4; }

static inline const uint8_t *fwd_positions(const hs_inv *ix, int64_t s, const fwd *f) {
    return fwd_borrowed(ix, f) ? ix->pos_base + ix->pos_off[s] : (const uint8_t *)(f->tf + f->n);
}

/* memcpy: a mapped snapshot does not align a 2- or 4-byte slot's positions */
static inline int32_t pos_get(const uint8_t *p, int w, int64_t i) {
    if (w == 1) return p[i];
    if (w == 2) {
        uint16_t v;
        memcpy(&v, p + 2 * i, 2);
        return v;
    }
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}

static inline void pos_put(uint8_t *p, int w, int64_t i, int32_t v) {
    if (w == 1) {
        p[i] = (uint8_t)v;
    } else if (w == 2) {
        uint16_t u = (uint16_t)v;
        memcpy(p + 2 * i, &u, 2);
    } else {
        memcpy(p + 4 * i, &v, 4);
    }
}

static inline int allowed(const uint64_t *bits, int64_t nbits, int32_t s) {
    if (!bits) return 1;
    return s < nbits && ((bits[s >> 6] >> (s & 63)) & 1);
}

static inline double term_score(double idf_w, int32_t tf, int32_t dl, double k1, double b, double avgdl) {
    return idf_w * tf / (tf + k1 * (1.0 - b + b * dl / avgdl));
}


#endif
